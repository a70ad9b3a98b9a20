# The operator image. Multi-stage: the build stage resolves the pinned
# dependencies into a virtualenv; the final stage is the bare base image plus
# that virtualenv, run as an unprivileged numeric user. Nothing in it writes
# to the root filesystem, so it runs with readOnlyRootFilesystem.
#
# It is also the work-queue worker's image: pyproject.toml's [project.scripts]
# installs both console scripts into /opt/paralleljob/bin, on PATH. The
# entrypoint is the operator; a worker pod names its own command:
#   command: ["paralleljob-worker", "--redis", "redis://redis:6379/0", "--stream", "items", "--", ...]
# and `python3` is the virtualenv's, with redis-py, for the per-item task
# (docs/worker.md, manifests/examples/workqueue/).
#
# BASE_IMAGE defaults to the official slim Python image. Where no registry is
# reachable, hack/base-image.sh assembles an equivalent from Debian packages
# (debootstrap + Debian's python3 3.11) and `make image-local` passes it here;
# this file is the same for both.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
RUN python3 -m venv /opt/paralleljob \
 && /opt/paralleljob/bin/pip install --quiet pip==26.3
WORKDIR /src
# Dependencies first, in their own layer: reused until pyproject.toml or the
# lock changes. Runtime dependencies only, each pinned by requirements.lock.
COPY pyproject.toml requirements.lock ./
COPY hack/check-pins.py hack/
RUN python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' >runtime.txt \
 && /opt/paralleljob/bin/pip install --quiet -c requirements.lock -r runtime.txt
COPY VERSION ./
COPY operator/ operator/
# Then the package itself; every installed distribution must be pinned, at
# that version, by the lock. pip and setuptools are not needed at run time.
RUN /opt/paralleljob/bin/pip install --quiet -c requirements.lock . \
 && /opt/paralleljob/bin/pip check \
 && /opt/paralleljob/bin/pip freeze --all | python3 hack/check-pins.py requirements.lock pip setuptools paralleljob-operator \
 && /opt/paralleljob/bin/pip uninstall --quiet --yes pip setuptools \
 && echo 'paralleljob:x:65532:65532:paralleljob-operator:/nonexistent:/usr/sbin/nologin' >>/etc/passwd \
 && echo 'paralleljob:x:65532:' >>/etc/group

FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="paralleljob-operator" \
      org.opencontainers.image.description="The batch/v1 Job controller as a ParallelJob custom resource, and paralleljob-worker, the worker of a work queue on a Redis stream" \
      dev.paralleljob.commands="paralleljob-operator paralleljob-worker"
COPY --from=build /etc/passwd /etc/group /etc/
COPY --from=build /opt/paralleljob /opt/paralleljob
ENV PATH=/opt/paralleljob/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
# kopf's liveness endpoint: GET :8080/healthz
EXPOSE 8080
ENTRYPOINT ["paralleljob-operator"]
CMD ["--liveness-port=8080"]
