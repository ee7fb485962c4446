#include "runtime/daemon/http/tls.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "common/error.h"

namespace dype::rt::daemon {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::string read_file(const std::string& path, const std::string& flag) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(flag, "cannot read '" + path + "': " + std::strerror(errno));
  std::ostringstream s;
  s << f.rdbuf();
  if (f.bad()) throw InputError(flag, "cannot read '" + path + "'");
  return s.str();
}

std::unique_ptr<BIO, BioFree> memory_bio(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The PEM certificates in `pem`, the first one returned (nullptr when there is none).
std::unique_ptr<X509, X509Free> first_certificate(const std::string& pem, int* count) {
  auto bio = memory_bio(pem);
  std::unique_ptr<X509, X509Free> first;
  *count = 0;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    ++*count;
    if (!first) first.reset(x);
    else X509_free(x);
  }
  ERR_clear_error();  // the end of the file reads as an error
  return first;
}

}  // namespace

std::optional<TlsIdentity> load_tls_identity(const std::string& cert_file, const std::string& key_file) {
  if (cert_file.empty() && key_file.empty()) return std::nullopt;
  if (key_file.empty()) throw InputError("--tls-key", "required with --tls-cert (the certificate's private key)");
  if (cert_file.empty()) throw InputError("--tls-cert", "required with --tls-key (the key's certificate)");
  TlsIdentity id{read_file(cert_file, "--tls-cert"), read_file(key_file, "--tls-key")};
  int certs = 0;
  const auto leaf = first_certificate(id.cert_chain_pem, &certs);
  if (!leaf) throw InputError("--tls-cert", "'" + cert_file + "' holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
  auto bio = memory_bio(id.private_key_pem);
  std::unique_ptr<EVP_PKEY, KeyFree> key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!key)
    throw InputError("--tls-key", "'" + key_file + "' holds no unencrypted PEM private key (-----BEGIN PRIVATE KEY-----)");
  if (X509_check_private_key(leaf.get(), key.get()) != 1) {
    ERR_clear_error();
    throw InputError("--tls-key", "'" + key_file + "' is not the private key of the certificate in '" + cert_file + "'");
  }
  return id;
}

std::string load_ca_certificates(const std::string& file, const std::string& flag) {
  std::string pem = read_file(file, flag);
  int certs = 0;
  if (!first_certificate(pem, &certs))
    throw InputError(flag, "'" + file + "' holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
  return pem;
}

}  // namespace dype::rt::daemon
