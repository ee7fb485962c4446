#pragma once
// Test certificates made at test time with the `openssl` command line: a self-signed CA, a server
// certificate it signed for 127.0.0.1 and localhost (EC P-256, valid 2 days), and a second CA that
// signed nothing (a client trusting it must refuse the server). A test without openssl skips:
//
//   const dype::test::TestPki pki = dype::test::make_test_pki();
//   if (!pki.ok) GTEST_SKIP() << pki.why;
//   ... pki.server_cert, pki.server_key, pki.ca ...
#include <cstdlib>
#include <filesystem>
#include <string>

#include "test_temp_dir.h"

namespace dype::test {

struct TestPki {
  bool ok = false;
  std::string why;  // when not ok
  std::filesystem::path dir, ca, ca_key, server_cert, server_key, other_ca, other_key;
};

// Made once per process (the same files for every test of it).
inline const TestPki& make_test_pki() {
  static const TestPki pki = [] {
    TestPki p;
    if (std::system("openssl version > /dev/null 2>&1") != 0) {
      p.why = "the openssl command line is not installed (apt-get install openssl): TLS tests skipped";
      return p;
    }
    p.dir = process_temp_dir("dype_tls_pki");
    p.ca = p.dir / "ca.pem";
    p.ca_key = p.dir / "ca.key";
    p.server_cert = p.dir / "server.pem";
    p.server_key = p.dir / "server.key";
    p.other_ca = p.dir / "other-ca.pem";
    p.other_key = p.dir / "other-ca.key";
    const std::string d = p.dir.string();
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 ";
    const std::string script =
        "cd '" + d + "' && printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nbasicConstraints=CA:FALSE\\n"
        "keyUsage=digitalSignature,keyEncipherment\\nextendedKeyUsage=serverAuth\\n' > server.ext"
        " && openssl req -x509" + ec + "-keyout ca.key -out ca.pem -subj /CN=dype-test-ca"
        " && openssl req -x509" + ec + "-keyout other-ca.key -out other-ca.pem -subj /CN=dype-other-ca"
        " && openssl req" + ec + "-keyout server.key -out server.csr -subj /CN=localhost"
        " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2"
        " -extfile server.ext -out server.pem";
    if (std::system(("(" + script + ") > '" + d + "/openssl.log' 2>&1").c_str()) != 0) {
      p.why = "openssl could not make the test certificates (see " + d + "/openssl.log)";
      return p;
    }
    p.ok = true;
    return p;
  }();
  return pki;
}

}  // namespace dype::test
