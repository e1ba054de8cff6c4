# One image for every kq process: python -m services.<name>, python -m kubesim, kq.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# Only what the package needs (keeps .venv, tests and caches out of the image).
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY kubesim ./kubesim
COPY services ./services
RUN pip install . && rm -rf /src

RUN useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin kq \
 && mkdir -p /var/run/kubesim && chown 10001 /var/run/kubesim
USER 10001
WORKDIR /home/kq

# Each Deployment / compose service sets its own command.
CMD ["kq", "--help"]
