#pragma once
// TLS for the daemon's front ends (dype-serve --tls-cert/--tls-key) and for dype-client
// (--tls-ca): the PEM files read and checked once, with errors that name the flag, so both the
// HTTP transport (Asio's ssl::context) and gRPC (SslServerCredentials) take the same bytes.
//
//   const std::optional<TlsIdentity> tls = load_tls_identity(cert_file, key_file);  // both or neither
//   if (tls) http_options.tls = *tls;  grpc.set_tls(*tls);
#include <optional>
#include <string>

namespace dype::rt::daemon {

// A server's certificate chain (leaf first) and its private key, both PEM.
struct TlsIdentity {
  std::string cert_chain_pem;
  std::string private_key_pem;
};

// --tls-cert and --tls-key: both empty gives nullopt; one without the other, a file that is missing,
// unreadable, not a PEM certificate (chain) or private key, or a key that is not the certificate's,
// throws InputError naming the flag.
std::optional<TlsIdentity> load_tls_identity(const std::string& cert_file, const std::string& key_file);

// Trusted CA certificates (PEM, one or more) from `file`; InputError naming `flag` when the file is
// missing, unreadable or holds no PEM certificate.
std::string load_ca_certificates(const std::string& file, const std::string& flag);

}  // namespace dype::rt::daemon
