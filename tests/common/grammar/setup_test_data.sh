#!/usr/bin/env bash
# Installs the ajv JSON Schema validator for grammar_generation_test:
#   <deps>/npm/ajv/node_modules/ajv   (tests/npm_packages.sh)
# Pinned: ajv 8 (draft 2020-12 via ajv/dist/2020).
exec "$(dirname "${BASH_SOURCE[0]}")/../../npm_packages.sh" grammar ajv grammar_generation_test ajv@8.17.1
