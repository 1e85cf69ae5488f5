#!/usr/bin/env bash
# Installs the official OpenAI npm client for openai_client_e2e_test:
#   <deps>/npm/openai-client/node_modules/openai   (tests/npm_packages.sh)
# Pinned: the last 6.x release (7.x needs node >= 22; Debian 12 ships node 18/20).
exec "$(dirname "${BASH_SOURCE[0]}")/../npm_packages.sh" e2e openai-client openai_client_e2e_test openai@6.30.1
