# A Kubernetes component image: the Debian base, the packages the component shells
# out to (kube-proxy: iptables, conntrack), and its binary. kubeadm's manifests
# name the command, so the image sets no entrypoint.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG PACKAGES=""
RUN if [ -n "$PACKAGES" ]; then apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null \
 && rm -rf /var/lib/apt/lists/*; fi
ARG BINARY
COPY ${BINARY} /usr/local/bin/${BINARY}
