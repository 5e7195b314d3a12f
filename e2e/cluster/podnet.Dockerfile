# The kind cluster's pod network: flanneld (routes between nodes, host-gw)
# and netpol (netpol/: NetworkPolicy ingress rules as nftables rules, run
# through the nft command); and its data network: the CNI plugins
# npwg-emulation (npwg/), macvlan and whereabouts, which podnet.yaml installs
# on each node, and the CRDs they read (up.sh applies them). podnet.yaml
# names the commands.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iproute2 procps nftables >/dev/null \
 && rm -rf /var/lib/apt/lists/*
COPY flanneld netpol /usr/local/bin/
COPY cni/ /opt/podnet/cni/
COPY crds/ /opt/podnet/crds/
