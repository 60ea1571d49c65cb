/*
 * file_pipeline: the C baseline for `e3dbkit file encrypt`.
 *
 * Writes an E3DB v3 file (100-byte text header with a secretbox-sealed data key, 24-byte secretstream header,
 * 64 KiB chunks, the last tagged FINAL) and computes, in the same pass, BLAKE2b-512 (libsodium generichash) and
 * MD5 (OpenSSL) of the encrypted bytes: secretstream push and the writes on the main thread, BLAKE2b on a second
 * thread and MD5 on a third. Buffers go round a ring of slots; a slot is reused once both hash threads are done
 * with it. Prints the FileMeta values (checksum = padded base64 MD5, size) and the BLAKE2b-512 in hex, like
 * `e3dbkit file encrypt`.
 *
 * Build: cc -O2 -pthread file_pipeline.c $(pkg-config --cflags --libs libsodium libcrypto) -o file_pipeline
 * Run:   file_pipeline ACCESS_KEY_FILE IN OUT      (the access key file holds the key in base64url, as for e3dbkit)
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <semaphore.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK 65536
#define SEALED (CHUNK + crypto_secretstream_xchacha20poly1305_ABYTES)
#define SLOTS 4

struct slot {
    unsigned char cipher[SEALED];
    size_t length;
    int last;        /* no more data after this slot */
    sem_t filled[2]; /* posted by the main thread for each hasher */
    sem_t drained;   /* posted by each hasher when done */
};

static struct slot ring[SLOTS];

static void die(const char *what) {
    fprintf(stderr, "file_pipeline: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void write_all(int fd, const unsigned char *bytes, size_t count) {
    while (count > 0) {
        ssize_t n = write(fd, bytes, count);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("write");
        }
        bytes += n;
        count -= (size_t)n;
    }
}

static size_t read_full(int fd, unsigned char *buffer, size_t count) {
    size_t filled = 0;
    while (filled < count) {
        ssize_t n = read(fd, buffer + filled, count - filled);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("read");
        }
        if (n == 0) break;
        filled += (size_t)n;
    }
    return filled;
}

static unsigned char b2_digest[64];
static unsigned char md5_digest[16];

static void *blake2b_thread(void *unused) {
    (void)unused;
    crypto_generichash_state state;
    crypto_generichash_init(&state, NULL, 0, 64);
    for (unsigned i = 0;; i = (i + 1) % SLOTS) {
        sem_wait(&ring[i].filled[0]);
        crypto_generichash_update(&state, ring[i].cipher, ring[i].length);
        int last = ring[i].last;
        sem_post(&ring[i].drained);
        if (last) break;
    }
    crypto_generichash_final(&state, b2_digest, 64);
    return NULL;
}

static void *md5_thread(void *unused) {
    (void)unused;
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    if (context == NULL || EVP_DigestInit_ex(context, EVP_md5(), NULL) != 1) {
        fprintf(stderr, "file_pipeline: MD5 unavailable\n");
        exit(1);
    }
    for (unsigned i = 0;; i = (i + 1) % SLOTS) {
        sem_wait(&ring[i].filled[1]);
        EVP_DigestUpdate(context, ring[i].cipher, ring[i].length);
        int last = ring[i].last;
        sem_post(&ring[i].drained);
        if (last) break;
    }
    unsigned int size = 0;
    EVP_DigestFinal_ex(context, md5_digest, &size);
    EVP_MD_CTX_free(context);
    return NULL;
}

/* Waits until both hashers are done with slot i. */
static void acquire(unsigned i) {
    sem_wait(&ring[i].drained);
    sem_wait(&ring[i].drained);
}

static void publish(unsigned i) {
    sem_post(&ring[i].filled[0]);
    sem_post(&ring[i].filled[1]);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: file_pipeline ACCESS_KEY_FILE IN OUT\n");
        return 64;
    }
    if (sodium_init() < 0) return 1;

    char key_text[128] = {0};
    FILE *key_file = fopen(argv[1], "r");
    if (key_file == NULL) die(argv[1]);
    size_t key_length = fread(key_text, 1, sizeof key_text - 1, key_file);
    fclose(key_file);
    while (key_length > 0 && (key_text[key_length - 1] == '\n' || key_text[key_length - 1] == '\r')) key_length--;
    unsigned char access_key[32];
    size_t decoded = 0;
    if (sodium_base642bin(access_key, sizeof access_key, key_text, key_length, NULL, &decoded, NULL,
                          sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 || decoded != 32) {
        fprintf(stderr, "file_pipeline: the access key file does not hold 32 bytes in base64url\n");
        return 65;
    }

    int in = open(argv[2], O_RDONLY);
    if (in < 0) die(argv[2]);
    int out = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0) die(argv[3]);

    for (unsigned i = 0; i < SLOTS; i++) {
        sem_init(&ring[i].filled[0], 0, 0);
        sem_init(&ring[i].filled[1], 0, 0);
        sem_init(&ring[i].drained, 0, 2);
    }
    pthread_t hashers[2];
    pthread_create(&hashers[0], NULL, blake2b_thread, NULL);
    pthread_create(&hashers[1], NULL, md5_thread, NULL);

    /* Headers: "3." b64u(edk) "." b64u(edkN) "." then the secretstream header. */
    unsigned char data_key[crypto_secretstream_xchacha20poly1305_KEYBYTES];
    crypto_secretstream_xchacha20poly1305_keygen(data_key);
    unsigned char nonce[crypto_secretbox_NONCEBYTES];
    randombytes_buf(nonce, sizeof nonce);
    unsigned char edk[sizeof data_key + crypto_secretbox_MACBYTES];
    crypto_secretbox_easy(edk, data_key, sizeof data_key, nonce, access_key);
    char edk_text[sodium_base64_ENCODED_LEN(sizeof edk, sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
    char nonce_text[sodium_base64_ENCODED_LEN(sizeof nonce, sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
    sodium_bin2base64(edk_text, sizeof edk_text, edk, sizeof edk, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    sodium_bin2base64(nonce_text, sizeof nonce_text, nonce, sizeof nonce, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    crypto_secretstream_xchacha20poly1305_state state;

    unsigned current = 0;
    acquire(current);
    int header_length = snprintf((char *)ring[current].cipher, SEALED, "3.%s.%s.", edk_text, nonce_text);
    crypto_secretstream_xchacha20poly1305_init_push(&state, ring[current].cipher + header_length, data_key);
    sodium_memzero(data_key, sizeof data_key);
    ring[current].length = (size_t)header_length + crypto_secretstream_xchacha20poly1305_HEADERBYTES;
    ring[current].last = 0;
    write_all(out, ring[current].cipher, ring[current].length);
    size_t total = ring[current].length;
    publish(current);

    /* Chunks, with one chunk of look-ahead so a full last chunk carries FINAL. */
    static unsigned char plain[2][CHUNK];
    size_t have = read_full(in, plain[0], CHUNK);
    for (unsigned p = 0;; p ^= 1) {
        size_t next = have == CHUNK ? read_full(in, plain[p ^ 1], CHUNK) : 0;
        int last = next == 0;
        current = (current + 1) % SLOTS;
        acquire(current);
        unsigned long long sealed = 0;
        crypto_secretstream_xchacha20poly1305_push(
            &state, ring[current].cipher, &sealed, plain[p], have, NULL, 0,
            last ? crypto_secretstream_xchacha20poly1305_TAG_FINAL : crypto_secretstream_xchacha20poly1305_TAG_MESSAGE);
        ring[current].length = (size_t)sealed;
        ring[current].last = last;
        write_all(out, ring[current].cipher, ring[current].length);
        total += (size_t)sealed;
        publish(current);
        if (last) break;
        have = next;
    }
    pthread_join(hashers[0], NULL);
    pthread_join(hashers[1], NULL);
    if (fsync(out) != 0) die("fsync");
    if (close(out) != 0) die("close");
    close(in);
    sodium_memzero(plain, sizeof plain);

    char md5_text[sodium_base64_ENCODED_LEN(16, sodium_base64_VARIANT_ORIGINAL)];
    sodium_bin2base64(md5_text, sizeof md5_text, md5_digest, 16, sodium_base64_VARIANT_ORIGINAL);
    char b2_text[129];
    sodium_bin2hex(b2_text, sizeof b2_text, b2_digest, 64);
    printf("checksum: %s\nsize: %zu\nblake2b-512: %s\n", md5_text, total, b2_text);
    return 0;
}
