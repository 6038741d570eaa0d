#include "server/http_tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/logging.h"

namespace ndserve {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Deleter<X509_STORE, X509_STORE_free>>;

void FreeChain(STACK_OF(X509) * chain) { sk_X509_pop_free(chain, X509_free); }
using ChainPtr = std::unique_ptr<STACK_OF(X509), Deleter<STACK_OF(X509), FreeChain>>;

// OpenSSL's queued error text (and the queue cleared), for a message.
std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no detail from OpenSSL";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

absl::Status Invalid(absl::string_view suffix, const std::string& path, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--http_tls_", suffix, "='", path, "': ", why));
}

// Every certificate in a PEM file, in file order; at least one.
absl::StatusOr<std::vector<X509Ptr>> ReadCertificates(const std::string& path,
                                                      absl::string_view suffix) {
  Bio bio(BIO_new_file(path.c_str(), "r"));
  if (bio == nullptr) return Invalid(suffix, path, "cannot be read");
  std::vector<X509Ptr> certs;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  // The loop ends on end of file, which OpenSSL queues as an error.
  ERR_clear_error();
  if (certs.empty()) return Invalid(suffix, path, "holds no PEM certificate");
  return certs;
}

}  // namespace

// One read of the files: what a handshake presents and verifies with.
struct HttpTls::Loaded {
  X509Ptr cert;
  ChainPtr chain;  // the certificates after the leaf in --http_tls_cert
  KeyPtr key;
  StorePtr client_ca;  // null without mutual TLS

  static absl::StatusOr<std::shared_ptr<const Loaded>> Read(const TlsFiles& files) {
    if (absl::Status s = ValidateTlsFiles(files, "http"); !s.ok()) return s;
    auto loaded = std::make_shared<Loaded>();
    absl::StatusOr<std::vector<X509Ptr>> certs = ReadCertificates(files.cert, "cert");
    if (!certs.ok()) return certs.status();
    loaded->cert = std::move(certs->front());
    loaded->chain.reset(sk_X509_new_null());
    for (size_t i = 1; i < certs->size(); ++i) {
      if (sk_X509_push(loaded->chain.get(), (*certs)[i].get()) == 0) {
        return absl::ResourceExhaustedError("no memory for the TLS certificate chain");
      }
      (*certs)[i].release();
    }
    Bio key_bio(BIO_new_file(files.key.c_str(), "r"));
    if (key_bio != nullptr) {
      loaded->key.reset(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
    }
    if (loaded->key == nullptr) {
      return Invalid("key", files.key,
                     absl::StrCat("not an unencrypted PEM private key (", OpenSslError(), ")"));
    }
    if (X509_check_private_key(loaded->cert.get(), loaded->key.get()) != 1) {
      ERR_clear_error();
      return Invalid("key", files.key, absl::StrCat("does not match --http_tls_cert='",
                                                    files.cert, "'"));
    }
    if (!files.client_ca.empty()) {
      absl::StatusOr<std::vector<X509Ptr>> cas = ReadCertificates(files.client_ca, "client_ca");
      if (!cas.ok()) return cas.status();
      loaded->client_ca.reset(X509_STORE_new());
      for (X509Ptr& ca : *cas) {
        // The store takes its own reference.
        if (X509_STORE_add_cert(loaded->client_ca.get(), ca.get()) != 1) {
          return Invalid("client_ca", files.client_ca, OpenSslError());
        }
      }
    }
    return std::shared_ptr<const Loaded>(std::move(loaded));
  }
};

HttpTls::HttpTls(TlsFiles files, int reload_seconds)
    : files_(std::move(files)), reload_(reload_seconds) {}

HttpTls::~HttpTls() = default;

absl::StatusOr<std::unique_ptr<HttpTls>> HttpTls::Create(const TlsFiles& files,
                                                         int reload_seconds) {
  std::unique_ptr<HttpTls> tls(new HttpTls(files, reload_seconds));
  absl::StatusOr<std::shared_ptr<const Loaded>> loaded = Loaded::Read(files);
  if (!loaded.ok()) return loaded.status();
  tls->loaded_ = *std::move(loaded);
  tls->read_at_ = std::chrono::steady_clock::now();
  return tls;
}

bool HttpTls::Setup(SSL_CTX& ctx) {
  if (SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION) != 1) return false;
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_cert_cb(&ctx, &HttpTls::OnHandshake, this);
  if (mutual()) {
    SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return true;
}

int HttpTls::OnHandshake(SSL* ssl, void* self) { return static_cast<HttpTls*>(self)->Use(ssl); }

int HttpTls::Use(SSL* ssl) {
  std::shared_ptr<const Loaded> loaded;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (reload_.count() > 0 && now - read_at_ >= reload_) {
      read_at_ = now;
      absl::StatusOr<std::shared_ptr<const Loaded>> fresh = Loaded::Read(files_);
      if (fresh.ok()) {
        loaded_ = *std::move(fresh);
      } else {
        LOG(WARNING) << "HTTP TLS reload failed, serving the previous certificate: "
                     << fresh.status().message();
      }
    }
    loaded = loaded_;
  }
  // The SSL object takes its own references, so a later reload cannot free what this
  // connection uses.
  if (SSL_use_cert_and_key(ssl, loaded->cert.get(), loaded->key.get(), loaded->chain.get(), 1) !=
      1) {
    ERR_clear_error();
    return 0;
  }
  if (loaded->client_ca != nullptr && SSL_set1_verify_cert_store(ssl, loaded->client_ca.get()) != 1) {
    ERR_clear_error();
    return 0;
  }
  return 1;
}

}  // namespace ndserve
