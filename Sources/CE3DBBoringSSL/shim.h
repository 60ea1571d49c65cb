// BoringSSL's AES and SHA-2 block APIs as swift-crypto builds them (its CCryptoBoringSSL target, whose symbols carry
// the CCryptoBoringSSL_ prefix), for E3DBPageCodec's SQLCipher pages: AES-CBC and HMAC into caller buffers, with the
// key schedule and the keyed hash states computed once. swift-crypto's Swift API returns a new `Data` per call and
// copies its hash state on the heap, which costs a SQLCipher page two to four allocations.
//
// No library is linked here: the symbols are swift-crypto's, present in every binary that links Crypto. The state
// structs (AES_KEY, SHA*_CTX) are used as opaque bytes of at most CE3DB_BORINGSSL_STATE_BYTES (BoringSSL's are 244,
// 96, 112 and 208 bytes and plain data, copyable with memcpy); only the function signatures, which are OpenSSL's
// public API, are declared.
#ifndef CE3DB_BORINGSSL_SHIM_H
#define CE3DB_BORINGSSL_SHIM_H

#include <stddef.h>
#include <stdint.h>

#define CE3DB_BORINGSSL_STATE_BYTES 512

int CCryptoBoringSSL_AES_set_encrypt_key(const uint8_t *key, unsigned bits, void *aes_key);
int CCryptoBoringSSL_AES_set_decrypt_key(const uint8_t *key, unsigned bits, void *aes_key);
void CCryptoBoringSSL_AES_cbc_encrypt(const uint8_t *in, uint8_t *out, size_t len, const void *aes_key, uint8_t *ivec,
                                      const int enc);

int CCryptoBoringSSL_SHA1_Init(void *sha);
int CCryptoBoringSSL_SHA1_Update(void *sha, const void *data, size_t len);
int CCryptoBoringSSL_SHA1_Final(uint8_t out[20], void *sha);
int CCryptoBoringSSL_SHA256_Init(void *sha);
int CCryptoBoringSSL_SHA256_Update(void *sha, const void *data, size_t len);
int CCryptoBoringSSL_SHA256_Final(uint8_t out[32], void *sha);
int CCryptoBoringSSL_SHA512_Init(void *sha);
int CCryptoBoringSSL_SHA512_Update(void *sha, const void *data, size_t len);
int CCryptoBoringSSL_SHA512_Final(uint8_t out[64], void *sha);

#endif
