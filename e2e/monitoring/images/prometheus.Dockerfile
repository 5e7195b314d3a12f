# The Prometheus server built from its Go module with Kubernetes service
# discovery only (Debian's has none). The Prometheus Operator passes flags
# only, so the image names the binary.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY prometheus /bin/prometheus
USER 65534:65534
ENTRYPOINT ["/bin/prometheus"]
