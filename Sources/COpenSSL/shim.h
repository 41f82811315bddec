// The system OpenSSL's EVP API, for the one curve swift-crypto does not offer: the P-192
// of SKAdNetwork 1.0 and 2.0 signatures.
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/err.h>
