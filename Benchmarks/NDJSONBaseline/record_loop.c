/*
 * record_loop.c: the libsodium floor for E3DB record field encryption, to compare `e3dbkit record
 * encrypt/decrypt --ndjson` against (scripts/ndjson-benchmark.sh).
 *
 * Per record, FIELDS fields of VALUE_BYTES bytes, exactly the cryptographic work of FieldCipher (spec 3.1):
 *   encrypt:         one randombytes_buf of 80 bytes per field (data key, edkN, efN; FieldCipher takes the
 *                    record's 80 * FIELDS bytes in one call), secretbox(value, efN, dk), secretbox(dk, edkN, ak).
 *                    No signing, no base64, no JSON.
 *   encrypt-shared-key: the variant the store could write (docs/performance.md, "Store"): one data key per
 *                    record, sealed once (every field carries the same edk and edkN), a fresh efN per field;
 *                    randombytes_buf of 32 + 24 + 24 * FIELDS bytes per record.
 *   decrypt:         secretbox_open(edk) -> dk, secretbox_open(ef) -> value. No JSON, no base64.
 *   decrypt-shared-key: records written by encrypt-shared-key: the data key is opened once per record.
 *   decrypt-verify:  decrypt plus one crypto_sign_verify_detached per record over a message of MESSAGE_BYTES
 *                    (the length of the record's canonical meta || data, which rec_sig signs).
 * One thread. Decrypt modes cycle through a pool of POOL pre-encrypted records.
 *
 *   cc -O2 record_loop.c $(pkg-config --cflags --libs libsodium) -o record_loop
 *   ./record_loop encrypt|encrypt-shared-key|decrypt|decrypt-shared-key|decrypt-verify RECORDS [FIELDS] [VALUE_BYTES] [MESSAGE_BYTES]
 * prints: MODE RECORDS SECONDS RECORDS_PER_SECOND
 */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL 1024

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s encrypt|encrypt-shared-key|decrypt|decrypt-shared-key|decrypt-verify RECORDS [FIELDS] [VALUE_BYTES] [MESSAGE_BYTES]\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    long records = atol(argv[2]);
    int fields = argc > 3 ? atoi(argv[3]) : 10;
    size_t value_bytes = argc > 4 ? (size_t)atol(argv[4]) : 32;
    size_t message_bytes = argc > 5 ? (size_t)atol(argv[5]) : 700;
    if (records <= 0 || fields <= 0 || fields > 1000 || value_bytes > 1 << 20 || message_bytes > 1 << 24) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    if (sodium_init() < 0) return 1;

    const size_t k = crypto_secretbox_KEYBYTES, n = crypto_secretbox_NONCEBYTES, t = crypto_secretbox_MACBYTES;
    unsigned char ak[crypto_secretbox_KEYBYTES];
    randombytes_buf(ak, sizeof ak);
    unsigned char *value = malloc(value_bytes);
    unsigned char *plain = malloc(value_bytes + 1);
    unsigned char *random = malloc((k + 2 * n) * (size_t)fields);
    unsigned char *ef = malloc(value_bytes + t);
    unsigned char edk[crypto_secretbox_KEYBYTES + crypto_secretbox_MACBYTES];
    unsigned char dk[crypto_secretbox_KEYBYTES];
    if (!value || !plain || !random || !ef) return 1;
    memset(value, 'v', value_bytes);
    unsigned long sink = 0;
    double start, seconds;

    if (strcmp(mode, "encrypt") == 0) {
        start = now();
        for (long r = 0; r < records; r++) {
            randombytes_buf(random, (k + 2 * n) * (size_t)fields);
            for (int f = 0; f < fields; f++) {
                const unsigned char *key = random + (k + 2 * n) * (size_t)f;
                crypto_secretbox_easy(ef, value, value_bytes, key + k + n, key);
                crypto_secretbox_easy(edk, key, k, key + k, ak);
                sink += ef[0] ^ edk[0];
            }
        }
        seconds = now() - start;
    } else if (strcmp(mode, "encrypt-shared-key") == 0) {
        start = now();
        for (long r = 0; r < records; r++) {
            randombytes_buf(random, k + n + n * (size_t)fields);
            crypto_secretbox_easy(edk, random, k, random + k, ak);
            for (int f = 0; f < fields; f++) {
                crypto_secretbox_easy(ef, value, value_bytes, random + k + n + n * (size_t)f, random);
                sink += ef[0] ^ edk[0];
            }
        }
        seconds = now() - start;
    } else if (strcmp(mode, "decrypt") == 0 || strcmp(mode, "decrypt-verify") == 0 ||
               strcmp(mode, "decrypt-shared-key") == 0) {
        int verify = strcmp(mode, "decrypt-verify") == 0;
        int shared = strcmp(mode, "decrypt-shared-key") == 0;
        size_t per_field = (k + t) + n + (value_bytes + t) + n;
        unsigned char *pool = malloc(per_field * (size_t)fields * POOL);
        unsigned char *messages = malloc(message_bytes * POOL);
        unsigned char *signatures = malloc(crypto_sign_BYTES * POOL);
        unsigned char pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
        if (!pool || !messages || !signatures) return 1;
        crypto_sign_keypair(pk, sk);
        for (int p = 0; p < POOL; p++) {
            for (int f = 0; f < fields; f++) {
                unsigned char *e = pool + per_field * ((size_t)p * fields + f);
                unsigned char *e_edk = e, *e_edkn = e + k + t, *e_ef = e_edkn + n, *e_efn = e_ef + value_bytes + t;
                if (!shared || f == 0) {
                    randombytes_buf(dk, k);
                    randombytes_buf(e_edkn, n);
                    crypto_secretbox_easy(e_edk, dk, k, e_edkn, ak);
                } else {
                    memcpy(e_edk, pool + per_field * ((size_t)p * fields), k + t + n);
                }
                randombytes_buf(e_efn, n);
                crypto_secretbox_easy(e_ef, value, value_bytes, e_efn, dk);
            }
            randombytes_buf(messages + message_bytes * p, message_bytes);
            crypto_sign_detached(signatures + crypto_sign_BYTES * p, NULL, messages + message_bytes * p, message_bytes, sk);
        }
        start = now();
        for (long r = 0; r < records; r++) {
            int p = (int)(r % POOL);
            for (int f = 0; f < fields; f++) {
                unsigned char *e = pool + per_field * ((size_t)p * fields + f);
                unsigned char *e_edk = e, *e_edkn = e + k + t, *e_ef = e_edkn + n, *e_efn = e_ef + value_bytes + t;
                if ((!shared || f == 0) && crypto_secretbox_open_easy(dk, e_edk, k + t, e_edkn, ak) != 0) return 3;
                if (crypto_secretbox_open_easy(plain, e_ef, value_bytes + t, e_efn, dk) != 0) return 3;
                sink += plain[0];
            }
            if (verify && crypto_sign_verify_detached(signatures + crypto_sign_BYTES * p, messages + message_bytes * p,
                                                      message_bytes, pk) != 0)
                return 3;
        }
        seconds = now() - start;
        free(pool);
        free(messages);
        free(signatures);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    printf("%s %ld %.3f %.0f\n", mode, records, seconds, (double)records / seconds);
    fprintf(stderr, "(checksum %lu)\n", sink);
    free(value);
    free(plain);
    free(random);
    free(ef);
    return 0;
}
