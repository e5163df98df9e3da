/*
 * SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) for the access-token check, without a crypto library. The block
 * compression has two implementations: portable C, and one with the x86 SHA extensions (SHA-NI: sha256rnds2,
 * sha256msg1/2, in Intel and AMD processors since Goldmont / Zen), chosen once at run time by CPUID. A token check
 * is two compressions, so the choice decides most of a node's cost per token.
 */
#include "gt_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define GT_HAVE_SHA_NI 1
#include <immintrin.h>
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
};

static inline uint32_t rotr(const uint32_t x, const int n)
{
    return (x >> n) | (x << (32 - n));
}

static void compress_portable(uint32_t state[8], const uint8_t block[64])
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
    {
        w[i] = gt_get_u32(block + 4 * i);
    }
    for (int i = 16; i < 64; i++)
    {
        const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; i++)
    {
        const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
}

#ifdef GT_HAVE_SHA_NI
/*
 * Four rounds: the schedule words w (already in order) plus their constants, two rounds per sha256rnds2 (it takes
 * the round inputs from the low two dwords). The state lives in two registers, abef and cdgh, as the instruction
 * wants it.
 */
#define GT_SHA_ROUNDS4(w_, k_) \
    do \
    { \
        __m128i input_ = _mm_add_epi32((w_), _mm_loadu_si128((const __m128i *)(K + (k_)))); \
        cdgh = _mm_sha256rnds2_epu32(cdgh, abef, input_); \
        input_ = _mm_shuffle_epi32(input_, 0x0E); \
        abef = _mm_sha256rnds2_epu32(abef, cdgh, input_); \
    } while (0)

/* The next four schedule words from the last sixteen (w0 oldest .. w3 newest): FIPS 180-4 6.2.2 step 1. */
#define GT_SHA_SCHEDULE(w0_, w1_, w2_, w3_) \
    _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32((w0_), (w1_)), _mm_alignr_epi8((w3_), (w2_), 4)), (w3_))

__attribute__((target("sha,sse4.1,ssse3")))
static void compress_sha_ni(uint32_t state[8], const uint8_t block[64])
{
    const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
    /* state[0..3] = a b c d, state[4..7] = e f g h (dword 0 first) -> abef = (f e b a), cdgh = (h g d c) */
    const __m128i dcba = _mm_loadu_si128((const __m128i *)state);
    const __m128i hgfe = _mm_loadu_si128((const __m128i *)(state + 4));
    const __m128i badc = _mm_shuffle_epi32(dcba, 0xB1);
    const __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(badc, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, badc, 0xF0);
    const __m128i abef_in = abef;
    const __m128i cdgh_in = cdgh;

    __m128i w0 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)block), byte_swap);
    __m128i w1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(block + 16)), byte_swap);
    __m128i w2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(block + 32)), byte_swap);
    __m128i w3 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(block + 48)), byte_swap);
    GT_SHA_ROUNDS4(w0, 0);
    GT_SHA_ROUNDS4(w1, 4);
    GT_SHA_ROUNDS4(w2, 8);
    GT_SHA_ROUNDS4(w3, 12);
    for (int round = 16; round < 64; round += 16)
    {
        w0 = GT_SHA_SCHEDULE(w0, w1, w2, w3);
        GT_SHA_ROUNDS4(w0, round);
        w1 = GT_SHA_SCHEDULE(w1, w2, w3, w0);
        GT_SHA_ROUNDS4(w1, round + 4);
        w2 = GT_SHA_SCHEDULE(w2, w3, w0, w1);
        GT_SHA_ROUNDS4(w2, round + 8);
        w3 = GT_SHA_SCHEDULE(w3, w0, w1, w2);
        GT_SHA_ROUNDS4(w3, round + 12);
    }
    abef = _mm_add_epi32(abef, abef_in);
    cdgh = _mm_add_epi32(cdgh, cdgh_in);

    /* back to a b c d / e f g h */
    const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)state, _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)(state + 4), _mm_alignr_epi8(dchg, feba, 8));
}
#endif

typedef void (*compress_function)(uint32_t state[8], const uint8_t block[64]);

static compress_function chosen_compress; /* atomic; NULL until the first use chose */

static compress_function choose_compress(void)
{
#ifdef GT_HAVE_SHA_NI
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sha") && __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("ssse3"))
    {
        return compress_sha_ni;
    }
#endif
    return compress_portable;
}

static void compress(uint32_t state[8], const uint8_t block[64])
{
    compress_function f = __atomic_load_n(&chosen_compress, __ATOMIC_RELAXED);
    if (f == NULL)
    {
        f = choose_compress();
        __atomic_store_n(&chosen_compress, f, __ATOMIC_RELAXED);
    }
    f(state, block);
}

int gt_sha256_accelerated(void)
{
#ifdef GT_HAVE_SHA_NI
    return choose_compress() == compress_sha_ni;
#else
    return 0;
#endif
}

void gt_sha256_use_portable(const int portable)
{
    __atomic_store_n(&chosen_compress, portable ? compress_portable : choose_compress(), __ATOMIC_RELAXED);
}

void gt_sha256_init(gt_sha256 *sha)
{
    static const uint32_t initial[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19
    };
    memcpy(sha->state, initial, sizeof(initial));
    sha->bytes = 0;
    sha->fill = 0;
}

void gt_sha256_update(gt_sha256 *sha, const uint8_t *data, size_t length)
{
    sha->bytes += length;
    while (length > 0)
    {
        const size_t take = 64 - sha->fill < length ? 64 - sha->fill : length;
        memcpy(sha->block + sha->fill, data, take);
        sha->fill += (uint32_t)take;
        data += take;
        length -= take;
        if (sha->fill == 64)
        {
            compress(sha->state, sha->block);
            sha->fill = 0;
        }
    }
}

void gt_sha256_final(gt_sha256 *sha, uint8_t digest[32])
{
    const uint64_t bits = sha->bytes * 8;
    static const uint8_t pad[64] = { 0x80 };
    const size_t pad_length = sha->fill < 56 ? 56 - sha->fill : 120 - sha->fill;
    uint8_t length_bytes[8];
    gt_put_u64(length_bytes, bits);
    gt_sha256_update(sha, pad, pad_length);
    gt_sha256_update(sha, length_bytes, 8);
    for (int i = 0; i < 8; i++)
    {
        gt_put_u32(digest + 4 * i, sha->state[i]);
    }
}

void gt_hmac_key_init(gt_hmac_key *hmac, const uint8_t *key, size_t key_length)
{
    uint8_t block[64];
    uint8_t hashed[32];
    if (key_length > 64)
    {
        gt_sha256 sha;
        gt_sha256_init(&sha);
        gt_sha256_update(&sha, key, key_length);
        gt_sha256_final(&sha, hashed);
        key = hashed;
        key_length = 32;
    }
    memset(block, 0, sizeof(block));
    memcpy(block, key, key_length);
    for (int i = 0; i < 64; i++)
    {
        block[i] ^= 0x36;
    }
    gt_sha256_init(&hmac->inner);
    gt_sha256_update(&hmac->inner, block, 64);
    for (int i = 0; i < 64; i++)
    {
        block[i] ^= 0x36 ^ 0x5c;
    }
    gt_sha256_init(&hmac->outer);
    gt_sha256_update(&hmac->outer, block, 64);
}

void gt_hmac_sha256(const gt_hmac_key *hmac, const uint8_t *data, const size_t length, uint8_t mac[32])
{
    gt_sha256 sha = hmac->inner;
    uint8_t inner[32];
    gt_sha256_update(&sha, data, length);
    gt_sha256_final(&sha, inner);
    sha = hmac->outer;
    gt_sha256_update(&sha, inner, 32);
    gt_sha256_final(&sha, mac);
}

void gt_token_message(uint8_t out[32], const int opcode, const uint32_t segment_id, const uint64_t grant_offset,
    const uint64_t grant_length, const uint32_t expiry_sec)
{
    out[0] = 'G';
    out[1] = 'R';
    out[2] = 'T';
    out[3] = '1';
    out[4] = (uint8_t)opcode;
    out[5] = 0;
    out[6] = 0;
    out[7] = 0;
    gt_put_u32(out + 8, segment_id);
    gt_put_u64(out + 12, grant_offset);
    gt_put_u64(out + 20, grant_length);
    gt_put_u32(out + 28, expiry_sec);
}

int gt_token_verify(const gt_hmac_key *hmac, const int opcode, const uint32_t segment_id, const uint64_t grant_offset,
    const uint64_t grant_length, const uint32_t expiry_sec, const uint8_t mac[GT_MAC_LENGTH])
{
    uint8_t message[32];
    uint8_t expected[32];
    uint8_t difference = 0;
    gt_token_message(message, opcode, segment_id, grant_offset, grant_length, expiry_sec);
    gt_hmac_sha256(hmac, message, sizeof(message), expected);
    for (int i = 0; i < GT_MAC_LENGTH; i++)
    {
        difference |= (uint8_t)(expected[i] ^ mac[i]);
    }
    return difference == 0;
}
