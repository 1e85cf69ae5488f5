// ReadClusterTokenFile: the cluster token kept in a file (a secret store's
// mount, systemd's $CREDENTIALS_DIRECTORY, a Kubernetes Secret volume), shared
// by the router's and the nodes' `cluster_token_file` option; ReadSecretFile
// the same for any secret option (the router's admin_key_file).
// Thread rule: a free function; safe from any thread.
#pragma once

#include <string>

#include "common/base/status.h"

namespace tandem::net {

// The file's contents with trailing whitespace (newline, CR, space, tab)
// stripped. InvalidArgument naming the path when the file cannot be read, is
// over 4096 bytes, or holds fewer than 16 bytes of token. The token itself
// never appears in an error.
StatusOr<std::string> ReadClusterTokenFile(const std::string& path);

// The same rules for the secret file of option `option` ("admin_key_file"), named in errors.
StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& option);

}  // namespace tandem::net
