#include "security/certificates.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <ctime>
#include <memory>
#include <stdexcept>

namespace cifar::security {
namespace {

template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using Certificate = std::unique_ptr<X509, Deleter<X509_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using Extension = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;
using Store = std::unique_ptr<X509_STORE, Deleter<X509_STORE_free>>;
using StoreContext = std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX_free>>;

// Throws, with OpenSSL's reason; leaves the thread's error queue empty (the operator's reconcile
// thread also runs cpprest's TLS).
[[noreturn]] void fail(const std::string& what) {
  const unsigned long code = ERR_get_error();
  char reason[256] = "";
  if (code != 0) ERR_error_string_n(code, reason, sizeof reason);
  ERR_clear_error();
  throw std::runtime_error("cannot " + what + (code != 0 ? std::string(": ") + reason : ""));
}

Bio memory_bio() {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio) fail("allocate a memory BIO");
  return bio;
}

void check(int ok, const std::string& what) {
  if (ok != 1) fail(what);
}

Key new_key() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) fail("make an EC P-256 key");
  return key;
}

void add_extension(X509* certificate, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX context;
  X509V3_set_ctx(&context, issuer, certificate, nullptr, nullptr, 0);
  Extension extension(X509V3_EXT_conf_nid(nullptr, &context, nid, value.c_str()));
  if (!extension) fail("make the certificate extension " + value);
  check(X509_add_ext(certificate, extension.get(), -1), "add the extension " + value);
}

// A certificate for `key`'s public half named `common_name`, valid as the request says; the
// caller adds its extensions and signs it.
Certificate new_certificate(const EVP_PKEY* key, const std::string& common_name,
                            const CertificateRequest& request) {
  Certificate certificate(X509_new());
  if (!certificate) fail("make a certificate");
  check(X509_set_version(certificate.get(), 2), "set the certificate's version");
  unsigned char serial[16];
  check(RAND_bytes(serial, sizeof serial), "draw a serial number");
  serial[0] &= 0x7F;  // positive
  std::unique_ptr<BIGNUM, Deleter<BN_free>> number(BN_bin2bn(serial, sizeof serial, nullptr));
  if (!number ||
      BN_to_ASN1_INTEGER(number.get(), X509_get_serialNumber(certificate.get())) == nullptr) {
    fail("set the serial number");
  }
  if (X509_gmtime_adj(X509_getm_notBefore(certificate.get()), -request.valid_before_now.count()) ==
          nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(certificate.get()), request.valid_for.count()) ==
          nullptr) {
    fail("set the validity");
  }
  X509_NAME* name = X509_get_subject_name(certificate.get());
  const auto cut = common_name.substr(0, ub_common_name);  // X.509's bound (64)
  check(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(cut.c_str()), -1, -1, 0),
        "name the certificate " + cut);
  check(X509_set_pubkey(certificate.get(), const_cast<EVP_PKEY*>(key)), "set the public key");
  return certificate;
}

std::string pem_of(const X509* certificate) {
  auto bio = memory_bio();
  check(PEM_write_bio_X509(bio.get(), const_cast<X509*>(certificate)), "write a certificate");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return {data, static_cast<size_t>(size)};
}

std::string pem_of(const EVP_PKEY* key) {
  auto bio = memory_bio();
  check(PEM_write_bio_PrivateKey(bio.get(), const_cast<EVP_PKEY*>(key), nullptr, nullptr, 0,
                                 nullptr, nullptr),
        "write a private key");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return {data, static_cast<size_t>(size)};
}

Certificate parse_certificate(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) fail("read a certificate");
  Certificate certificate(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!certificate) {
    ERR_clear_error();
    throw std::invalid_argument("not a PEM certificate");
  }
  return certificate;
}

std::string utc_text(const ASN1_TIME* time) {
  struct tm parts {};
  if (ASN1_TIME_to_tm(time, &parts) != 1) return "an unreadable time";
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &parts);
  return text;
}

}  // namespace

namespace {

// The job's CA: its certificate, and its key while the job's certificates are signed.
struct Authority {
  Certificate certificate;
  Key key;
};

Authority make_authority(const CertificateRequest& request) {
  Authority ca{nullptr, new_key()};
  ca.certificate = new_certificate(ca.key.get(), "CA " + request.common_name, request);
  X509* certificate = ca.certificate.get();
  check(X509_set_issuer_name(certificate, X509_get_subject_name(certificate)),
        "set the CA's issuer");
  add_extension(certificate, certificate, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
  add_extension(certificate, certificate, NID_key_usage, "critical,keyCertSign,cRLSign");
  add_extension(certificate, certificate, NID_subject_key_identifier, "hash");
  if (X509_sign(certificate, ca.key.get(), EVP_sha256()) == 0) fail("sign the CA");
  return ca;
}

// A certificate of `ca` named `common_name` for `extended_key_usage` ("serverAuth", ...), under
// the request's DNS names and addresses when `with_names`.
JobCredentials issue(const Authority& ca, const CertificateRequest& request,
                     const std::string& common_name, const std::string& extended_key_usage,
                     bool with_names) {
  const auto key = new_key();
  auto leaf = new_certificate(key.get(), common_name, request);
  X509* issuer = ca.certificate.get();
  check(X509_set_issuer_name(leaf.get(), X509_get_subject_name(issuer)), "set the issuer");
  add_extension(leaf.get(), issuer, NID_basic_constraints, "critical,CA:FALSE");
  add_extension(leaf.get(), issuer, NID_key_usage, "critical,digitalSignature");
  add_extension(leaf.get(), issuer, NID_ext_key_usage, extended_key_usage);
  add_extension(leaf.get(), issuer, NID_authority_key_identifier, "keyid:always");
  std::string names;
  for (const auto& dns : request.dns_names) names += (names.empty() ? "" : ",") + ("DNS:" + dns);
  for (const auto& ip : request.ip_addresses) names += (names.empty() ? "" : ",") + ("IP:" + ip);
  if (with_names && !names.empty()) add_extension(leaf.get(), issuer, NID_subject_alt_name, names);
  if (X509_sign(leaf.get(), ca.key.get(), EVP_sha256()) == 0) fail("sign the certificate");
  return {pem_of(issuer), pem_of(leaf.get()), pem_of(key.get())};
}

// Whether `certificate_pem`'s extended key usage allows `purpose` (X509_PURPOSE_SSL_CLIENT, ...);
// a certificate without one allows every purpose.
bool allows(const std::string& certificate_pem, int purpose) {
  Certificate certificate;
  try {
    certificate = parse_certificate(certificate_pem);
  } catch (const std::invalid_argument&) {
    return false;
  }
  const bool allowed = X509_check_purpose(certificate.get(), purpose, 0) == 1;
  ERR_clear_error();
  return allowed;
}

}  // namespace

JobCredentials make_job_credentials(const CertificateRequest& request) {
  // Both ends of every connection between members: the same certificate serves and calls.
  return issue(make_authority(request), request, request.common_name, "serverAuth,clientAuth",
               /*with_names=*/true);
}

JobIdentities make_job_identities(const CertificateRequest& request) {
  const auto ca = make_authority(request);  // its key is dropped on return
  auto parameter_server = issue(ca, request, request.common_name + " parameter server",
                                "serverAuth", /*with_names=*/true);
  auto trainer = issue(ca, request, request.common_name + " trainer", "clientAuth",
                       /*with_names=*/false);
  return {std::move(parameter_server), std::move(trainer)};
}

bool may_serve(const std::string& certificate_pem) {
  return allows(certificate_pem, X509_PURPOSE_SSL_SERVER);
}

bool may_call(const std::string& certificate_pem) {
  return allows(certificate_pem, X509_PURPOSE_SSL_CLIENT);
}

std::string validity_problem(const std::string& certificate_pem) {
  const auto certificate = parse_certificate(certificate_pem);
  const ASN1_TIME* not_before = X509_get0_notBefore(certificate.get());
  const ASN1_TIME* not_after = X509_get0_notAfter(certificate.get());
  const int before = X509_cmp_current_time(not_before);
  const int after = X509_cmp_current_time(not_after);
  if (before == 0 || after == 0) return "of an unreadable validity";  // 0: OpenSSL's error
  if (before > 0) return "not valid before " + utc_text(not_before);
  if (after < 0) return "expired on " + utc_text(not_after);
  return "";
}

std::string common_name_of(const std::string& certificate_pem) {
  const auto certificate = parse_certificate(certificate_pem);
  const X509_NAME* subject = X509_get_subject_name(certificate.get());
  const int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (at < 0) return "";
  const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
  return {reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
          static_cast<size_t>(ASN1_STRING_length(data))};
}

std::chrono::system_clock::time_point expiry_of(const std::string& certificate_pem) {
  const auto certificate = parse_certificate(certificate_pem);
  struct tm parts {};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(certificate.get()), &parts) != 1) {
    throw std::invalid_argument("a certificate of an unreadable validity");
  }
  return std::chrono::system_clock::from_time_t(timegm(&parts));
}

bool key_matches(const std::string& certificate_pem, const std::string& private_key_pem) {
  Certificate certificate;
  try {
    certificate = parse_certificate(certificate_pem);
  } catch (const std::invalid_argument&) {
    return false;
  }
  Bio bio(BIO_new_mem_buf(private_key_pem.data(), static_cast<int>(private_key_pem.size())));
  const Key key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  const bool matches = key && X509_check_private_key(certificate.get(), key.get()) == 1;
  ERR_clear_error();
  return matches;
}

bool issued_by(const std::string& certificate_pem, const std::string& ca_pem) {
  Certificate certificate;
  Certificate ca;
  try {
    certificate = parse_certificate(certificate_pem);
    ca = parse_certificate(ca_pem);
  } catch (const std::invalid_argument&) {
    return false;
  }
  Store store(X509_STORE_new());
  StoreContext context(X509_STORE_CTX_new());
  if (!store || !context || X509_STORE_add_cert(store.get(), ca.get()) != 1 ||
      X509_STORE_CTX_init(context.get(), store.get(), certificate.get(), nullptr) != 1) {
    ERR_clear_error();
    return false;
  }
  const bool verified = X509_verify_cert(context.get()) == 1;
  ERR_clear_error();
  return verified;
}

}  // namespace cifar::security
