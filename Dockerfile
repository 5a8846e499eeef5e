# distrepro on CPU: the C-ADP reproduction (nox -s reproduce-cadp) in a container.
#
#   docker build -t distrepro .
#   docker run --rm -v "$PWD/out:/work" distrepro                       # = distrepro reproduce cadp
#   docker run --rm -v "$PWD/out:/work" distrepro distrepro reproduce qsr
#
# The tracking store (mlflow.db, mlartifacts/) and reports/ are written to /work, so mount a folder there.
#
# CUDA: start from an image that already holds torch 2.13 built for your CUDA (e.g. PyTorch's
# pytorch/pytorch:2.13.0-cuda*-runtime images, or an NVIDIA NGC PyTorch image matching 2.13) and drop the
# "CPU torch" step below; the lock's pins (torch==2.13.0) are satisfied by that build, so nothing replaces it.
# Run with --gpus all. Install into that image's Python rather than --system if it uses a venv or conda.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    MLFLOW_DISABLE_TELEMETRY=true \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_NO_CACHE=1

RUN pip install --no-cache-dir "uv>=0.8"

# where the image keeps the build's sources and the lock's constraints (paths inside the image, not the host's)
ARG SRC_DIR=/opt/distrepro
ARG CONSTRAINTS=/tmp/constraints.txt
WORKDIR ${SRC_DIR}
COPY pyproject.toml uv.lock setup.py MANIFEST.in README.md ./
COPY distrepro ./distrepro
COPY methods ./methods
COPY datasets ./datasets
COPY hardware_profiles ./hardware_profiles
COPY configs ./configs

# the versions of uv.lock, as constraints: the lock pins torch==2.13.0, and the CPU build (2.13.0+cpu, from
# PyTorch's index) satisfies it without PyPI's CUDA build and its NVIDIA wheels
RUN uv export --locked --no-hashes --no-emit-project --all-extras --all-groups -o ${CONSTRAINTS}
# CPU torch (drop on a CUDA base image, see above)
RUN uv pip install --system --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0" "torchvision==0.28.0"
# distrepro itself, not editable: the wheel ships methods/, datasets/, hardware_profiles/, configs/ (setup.py)
RUN uv pip install --system -c ${CONSTRAINTS} . && distrepro --version

WORKDIR /work
CMD ["distrepro", "reproduce", "cadp", "--no-progress"]
