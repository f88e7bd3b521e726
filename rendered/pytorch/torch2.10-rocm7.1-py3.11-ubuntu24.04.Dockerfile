# Rendered by `builder render` from images/pytorch/Dockerfile.j2 for torch2.10-rocm7.1-py3.11-ubuntu24.04.
# Do not edit: change the template or matrices/pytorch.yaml and re-render.
# Build with BuildKit; no frontend directive line: the built-in frontend supports RUN --mount.
# The build passes BASE_IMAGE (the pinned pull reference, mirror-mapped) and the CA bundle as
# the BuildKit secret `ca_bundle`; see docs/templates.md.
# Base: UNPINNED (bases.lock.json has no digest yet): `builder build` refuses this variant until
# `builder bases update` pins it.
ARG BASE_IMAGE=rocm/dev-ubuntu-24.04:7.1
FROM ${BASE_IMAGE}

LABEL io.github.builder-project.accelerator="rocm" \
      io.github.builder-project.family="pytorch" \
      io.github.builder-project.framework="torch" \
      io.github.builder-project.framework.version="2.10" \
      io.github.builder-project.gpu-archs="gfx900,gfx906,gfx908,gfx90a,gfx942,gfx950,gfx1030,gfx1100,gfx1101,gfx1102,gfx1200,gfx1201" \
      io.github.builder-project.matrix="pytorch" \
      io.github.builder-project.os="ubuntu24.04" \
      io.github.builder-project.platform="linux/amd64" \
      io.github.builder-project.python="3.11" \
      io.github.builder-project.rocm.version="7.1" \
      io.github.builder-project.variant="torch2.10-rocm7.1-py3.11-ubuntu24.04" \
      org.opencontainers.image.base.name="docker.io/rocm/dev-ubuntu-24.04:7.1" \
      org.opencontainers.image.description="torch 2.10 for ROCm 7.1, Python 3.11, ubuntu24.04 (linux/amd64)" \
      org.opencontainers.image.title="torch2.10-rocm7.1-py3.11-ubuntu24.04" \
      org.opencontainers.image.version="2.10"

# Layers shared by every variant on this base come first: the Python layer and the user do not
# depend on the accelerator, its build arguments or the framework, so BuildKit reuses (and the
# registry stores) them once per base; the accelerator-specific environment follows them.

# Python 3.11 from the deadsnakes PPA, in a venv (PEP 668); apt lists removed in the same layer.
RUN set -eux; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends software-properties-common gpg-agent; \
    add-apt-repository -y ppa:deadsnakes/ppa; \
    apt-get install -y --no-install-recommends ca-certificates python3.11 python3.11-venv; \
    apt-get purge -y --auto-remove software-properties-common gpg-agent; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb; \
    python3.11 -m venv /opt/venv; \
    /opt/venv/bin/python -c 'import sys; assert sys.version.startswith("3.11."), sys.version'
ENV PATH="/opt/venv/bin:${PATH}" \
    VIRTUAL_ENV="/opt/venv" \
    PYTHONUNBUFFERED="1" \
    PIP_NO_CACHE_DIR="1" \
    PIP_DISABLE_PIP_VERSION_CHECK="1"

# Unprivileged user (numeric, so `runAsNonRoot` can verify it); `USER` is set at the end.
RUN set -eux; \
    groupadd --system --gid 10001 app; \
    useradd --system --uid 10001 --gid 10001 --create-home --home-dir /home/app --shell /usr/sbin/nologin app

# Architecture lists are build arguments (a build never probes a GPU); kept in the environment so
# extensions compiled in derived images target the same architectures as the framework build.
ARG GPU_TARGETS="gfx900;gfx906;gfx908;gfx90a;gfx942;gfx950;gfx1030;gfx1100;gfx1101;gfx1102;gfx1200;gfx1201"
ARG PYTORCH_ROCM_ARCH="gfx900;gfx906;gfx908;gfx90a;gfx942;gfx950;gfx1030;gfx1100;gfx1101;gfx1102;gfx1200;gfx1201"
ENV GPU_TARGETS="${GPU_TARGETS}" \
    PYTORCH_ROCM_ARCH="${PYTORCH_ROCM_ARCH}"

# ROCm 7.1: run with --device=/dev/kfd --device=/dev/dri and --group-add for the groups
# owning them (video, render); the image user is not root.
ENV ROCM_VERSION="7.1"

# Python packages exactly as locked (locks/torch2.10-rocm7.1-py3.11-ubuntu24.04.txt, hashes checked). The CA bundle and
# index credentials are BuildKit secrets: optional, never in a layer or the image history.
RUN --mount=type=secret,id=ca_bundle,required=false \
    --mount=type=secret,id=netrc,required=false \
    --mount=type=bind,source=requirements.lock,target=/tmp/requirements.lock \
    set -eu; \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi; \
    if [ -s /run/secrets/netrc ]; then export NETRC=/run/secrets/netrc; fi; \
    pip install --no-cache-dir --require-hashes --no-compile \
        --index-url https://download.pytorch.org/whl/rocm7.1 \
        -r /tmp/requirements.lock

# Fail the build (not the first job) when the wheel does not match the variant; no GPU is probed.
RUN python -c 'import torch, sys; v = torch.__version__; print("torch", v, "cuda", torch.version.cuda, "hip", torch.version.hip); sys.exit(0 if v.startswith("2.10.") else 1)'

USER 10001:10001
WORKDIR /home/app
CMD ["python"]
