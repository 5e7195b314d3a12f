# One static Go binary of the Prometheus Operator on the Debian base, at /bin
# where the operator's generated pods look for its config reloader.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG BINARY
COPY ${BINARY} /bin/${BINARY}
USER 65534:65534
