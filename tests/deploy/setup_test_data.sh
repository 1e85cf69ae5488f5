#!/usr/bin/env bash
# Installs the Kubernetes schema validator for k8s_manifests_test:
#   <deps>/npm/k8s-validate/node_modules/kubernetes-models   the Kubernetes OpenAPI
#                                                            schemas as validating models
#   <deps>/npm/k8s-validate/node_modules/yaml                 YAML parser
# (tests/npm_packages.sh). Pinned: kubernetes-models 4.5.x is the last line that runs on
# node 18/20 (5.x needs node >= 22; Debian 12 ships node 18).
exec "$(dirname "${BASH_SOURCE[0]}")/../npm_packages.sh" deploy k8s-validate k8s_manifests_test \
  kubernetes-models@4.5.1 yaml@2.9.1
