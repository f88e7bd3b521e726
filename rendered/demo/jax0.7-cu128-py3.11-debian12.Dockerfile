# Rendered by `builder render` from images/jax/Dockerfile.j2 for jax0.7-cu128-py3.11-debian12.
# Do not edit: change the template or matrices/demo.yaml and re-render.
# Build with BuildKit; no frontend directive line: the built-in frontend supports RUN --mount.
# The build passes BASE_IMAGE (the pinned pull reference, mirror-mapped) and the CA bundle as
# the BuildKit secret `ca_bundle`; see docs/templates.md.
# Base: machine-local mirror of debian:bookworm; the build passes BASE_IMAGE=<mirror>@<digest>.
ARG BASE_IMAGE=debian:bookworm
FROM ${BASE_IMAGE}

LABEL io.github.builder-project.accelerator="cuda" \
      io.github.builder-project.cuda.version="12.8" \
      io.github.builder-project.family="jax" \
      io.github.builder-project.framework="jax" \
      io.github.builder-project.framework.version="0.7" \
      io.github.builder-project.gpu-archs="none" \
      io.github.builder-project.matrix="demo" \
      io.github.builder-project.min-driver="570.26" \
      io.github.builder-project.os="debian12" \
      io.github.builder-project.platform="linux/amd64" \
      io.github.builder-project.python="3.11" \
      io.github.builder-project.variant="jax0.7-cu128-py3.11-debian12" \
      org.opencontainers.image.base.name="docker.io/library/debian:bookworm" \
      org.opencontainers.image.description="jax 0.7 for CUDA 12.8, Python 3.11, debian12 (linux/amd64)" \
      org.opencontainers.image.title="jax0.7-cu128-py3.11-debian12" \
      org.opencontainers.image.version="0.7"

# Layers shared by every variant on this base come first: the Python layer and the user do not
# depend on the accelerator, its build arguments or the framework, so BuildKit reuses (and the
# registry stores) them once per base; the accelerator-specific environment follows them.

# Python 3.11 from debian12, in a venv (PEP 668); apt lists removed in the same layer.
RUN set -eux; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends ca-certificates python3 python3-venv; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb; \
    python3 -m venv /opt/venv; \
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

# The framework build in this image has no GPU kernels (matrix `gpu_archs: []`): label gpu-archs="none".

# NVIDIA container runtime: the hook refuses to start the container on a driver that cannot run
# CUDA 12.8 (minimum driver 570.26), with the forward-compatibility exemptions
# of the official CUDA 12.8 images.
ENV NVIDIA_REQUIRE_CUDA="cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=grid,driver>=470,driver<471 brand=tesla,driver>=470,driver<471 brand=nvidia,driver>=470,driver<471 brand=quadro,driver>=470,driver<471 brand=quadrortx,driver>=470,driver<471 brand=nvidiartx,driver>=470,driver<471 brand=vapps,driver>=470,driver<471 brand=vpc,driver>=470,driver<471 brand=vcs,driver>=470,driver<471 brand=vws,driver>=470,driver<471 brand=cloudgaming,driver>=470,driver<471 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536 brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536 brand=quadro,driver>=535,driver<536 brand=quadrortx,driver>=535,driver<536 brand=nvidiartx,driver>=535,driver<536 brand=vapps,driver>=535,driver<536 brand=vpc,driver>=535,driver<536 brand=vcs,driver>=535,driver<536 brand=vws,driver>=535,driver<536 brand=cloudgaming,driver>=535,driver<536 brand=unknown,driver>=550,driver<551 brand=grid,driver>=550,driver<551 brand=tesla,driver>=550,driver<551 brand=nvidia,driver>=550,driver<551 brand=quadro,driver>=550,driver<551 brand=quadrortx,driver>=550,driver<551 brand=nvidiartx,driver>=550,driver<551 brand=vapps,driver>=550,driver<551 brand=vpc,driver>=550,driver<551 brand=vcs,driver>=550,driver<551 brand=vws,driver>=550,driver<551 brand=cloudgaming,driver>=550,driver<551 brand=unknown,driver>=560,driver<561 brand=grid,driver>=560,driver<561 brand=tesla,driver>=560,driver<561 brand=nvidia,driver>=560,driver<561 brand=quadro,driver>=560,driver<561 brand=quadrortx,driver>=560,driver<561 brand=nvidiartx,driver>=560,driver<561 brand=vapps,driver>=560,driver<561 brand=vpc,driver>=560,driver<561 brand=vcs,driver>=560,driver<561 brand=vws,driver>=560,driver<561 brand=cloudgaming,driver>=560,driver<561 brand=unknown,driver>=565,driver<566 brand=grid,driver>=565,driver<566 brand=tesla,driver>=565,driver<566 brand=nvidia,driver>=565,driver<566 brand=quadro,driver>=565,driver<566 brand=quadrortx,driver>=565,driver<566 brand=nvidiartx,driver>=565,driver<566 brand=vapps,driver>=565,driver<566 brand=vpc,driver>=565,driver<566 brand=vcs,driver>=565,driver<566 brand=vws,driver>=565,driver<566 brand=cloudgaming,driver>=565,driver<566" \
    NVIDIA_VISIBLE_DEVICES="all" \
    NVIDIA_DRIVER_CAPABILITIES="compute,utility"

# Python packages exactly as locked (locks/jax0.7-cu128-py3.11-debian12.txt, hashes checked). The CA bundle and
# index credentials are BuildKit secrets: optional, never in a layer or the image history.
RUN --mount=type=secret,id=ca_bundle,required=false \
    --mount=type=secret,id=netrc,required=false \
    --mount=type=bind,source=requirements.lock,target=/tmp/requirements.lock \
    set -eu; \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi; \
    if [ -s /run/secrets/netrc ]; then export NETRC=/run/secrets/netrc; fi; \
    pip install --no-cache-dir --require-hashes --no-compile \
        -r /tmp/requirements.lock

# Fail the build (not the first job) when the wheel does not match the variant; no GPU is probed.
RUN python -c 'import jax, sys; v = jax.__version__; print("jax", v); sys.exit(0 if v.startswith("0.7.") else 1)'

USER 10001:10001
WORKDIR /home/app
CMD ["python"]
