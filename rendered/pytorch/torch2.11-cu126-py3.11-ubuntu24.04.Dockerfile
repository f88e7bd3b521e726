# Rendered by `builder render` from images/pytorch/Dockerfile.j2 for torch2.11-cu126-py3.11-ubuntu24.04.
# Do not edit: change the template or matrices/pytorch.yaml and re-render.
# Build with BuildKit; no frontend directive line: the built-in frontend supports RUN --mount.
# The build passes BASE_IMAGE (the pinned pull reference, mirror-mapped) and the CA bundle as
# the BuildKit secret `ca_bundle`; see docs/templates.md.
# Base: UNPINNED (bases.lock.json has no digest yet): `builder build` refuses this variant until
# `builder bases update` pins it.
ARG BASE_IMAGE=nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04
FROM ${BASE_IMAGE}

LABEL io.github.builder-project.accelerator="cuda" \
      io.github.builder-project.cuda.version="12.6" \
      io.github.builder-project.family="pytorch" \
      io.github.builder-project.framework="torch" \
      io.github.builder-project.framework.version="2.11" \
      io.github.builder-project.gpu-archs="sm_50,sm_60,sm_70,sm_75,sm_80,sm_86,sm_90" \
      io.github.builder-project.matrix="pytorch" \
      io.github.builder-project.min-driver="560.28.03" \
      io.github.builder-project.os="ubuntu24.04" \
      io.github.builder-project.platform="linux/amd64" \
      io.github.builder-project.python="3.11" \
      io.github.builder-project.variant="torch2.11-cu126-py3.11-ubuntu24.04" \
      org.opencontainers.image.base.name="docker.io/nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04" \
      org.opencontainers.image.description="torch 2.11 for CUDA 12.6, Python 3.11, ubuntu24.04 (linux/amd64)" \
      org.opencontainers.image.title="torch2.11-cu126-py3.11-ubuntu24.04" \
      org.opencontainers.image.version="2.11"

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
ARG CUDA_ARCHITECTURES="50-real;60-real;70-real;75-real;80-real;86-real;90-real"
ARG TORCH_CUDA_ARCH_LIST="5.0;6.0;7.0;7.5;8.0;8.6;9.0"
ENV CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES}" \
    TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST}"

# NVIDIA container runtime: the hook refuses to start the container on a driver that cannot run
# CUDA 12.6 (minimum driver 560.28.03), with the forward-compatibility exemptions
# of the official CUDA 12.6 images.
ENV NVIDIA_REQUIRE_CUDA="cuda>=12.6 brand=unknown,driver>=470,driver<471 brand=grid,driver>=470,driver<471 brand=tesla,driver>=470,driver<471 brand=nvidia,driver>=470,driver<471 brand=quadro,driver>=470,driver<471 brand=quadrortx,driver>=470,driver<471 brand=nvidiartx,driver>=470,driver<471 brand=vapps,driver>=470,driver<471 brand=vpc,driver>=470,driver<471 brand=vcs,driver>=470,driver<471 brand=vws,driver>=470,driver<471 brand=cloudgaming,driver>=470,driver<471 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536 brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536 brand=quadro,driver>=535,driver<536 brand=quadrortx,driver>=535,driver<536 brand=nvidiartx,driver>=535,driver<536 brand=vapps,driver>=535,driver<536 brand=vpc,driver>=535,driver<536 brand=vcs,driver>=535,driver<536 brand=vws,driver>=535,driver<536 brand=cloudgaming,driver>=535,driver<536 brand=unknown,driver>=550,driver<551 brand=grid,driver>=550,driver<551 brand=tesla,driver>=550,driver<551 brand=nvidia,driver>=550,driver<551 brand=quadro,driver>=550,driver<551 brand=quadrortx,driver>=550,driver<551 brand=nvidiartx,driver>=550,driver<551 brand=vapps,driver>=550,driver<551 brand=vpc,driver>=550,driver<551 brand=vcs,driver>=550,driver<551 brand=vws,driver>=550,driver<551 brand=cloudgaming,driver>=550,driver<551" \
    NVIDIA_VISIBLE_DEVICES="all" \
    NVIDIA_DRIVER_CAPABILITIES="compute,utility"

# Python packages exactly as locked (locks/torch2.11-cu126-py3.11-ubuntu24.04.txt, hashes checked). The CA bundle and
# index credentials are BuildKit secrets: optional, never in a layer or the image history.
RUN --mount=type=secret,id=ca_bundle,required=false \
    --mount=type=secret,id=netrc,required=false \
    --mount=type=bind,source=requirements.lock,target=/tmp/requirements.lock \
    set -eu; \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi; \
    if [ -s /run/secrets/netrc ]; then export NETRC=/run/secrets/netrc; fi; \
    pip install --no-cache-dir --require-hashes --no-compile \
        --index-url https://download.pytorch.org/whl/cu126 \
        -r /tmp/requirements.lock

# Fail the build (not the first job) when the wheel does not match the variant; no GPU is probed.
RUN python -c 'import torch, sys; v = torch.__version__; print("torch", v, "cuda", torch.version.cuda, "hip", torch.version.hip); sys.exit(0 if v.startswith("2.11.") else 1)'

USER 10001:10001
WORKDIR /home/app
CMD ["python"]
