/*
 * C tests of the native transfer library: codecs (frame header, SHA-256/HMAC, access tokens, QP information),
 * bookkeeping (memory regions, memory registrations, work-request batching), and the TCP client and server over
 * loopback (every byte verified, tokens, malformed and truncated frames, timeouts, admission, late COMMIT, READV
 * vectors against the server and against scripted answers), the RDMA_CONNECT exchange against the server, the RDMA
 * transport end to end over the in-process fake verbs of gt_fake_verbs.c (queue pairs brought up over TCP, one-sided
 * READ and WRITE, error completions), the client engine's one-sided READs over the fake, plus a short soak with
 * mixed sizes. Run plain, under ASan/UBSan and under
 * valgrind by the build.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "granary_transfer.h"
#include "gt_internal.h"
#include "gt_rdma.h"
#include "gt_fake_verbs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int passed;
static int failed;
static const char *current;

#define CHECK(condition_) do { if (!(condition_)) { \
        fprintf(stderr, "FAIL %s: %s:%d: %s\n", current, __FILE__, __LINE__, #condition_); failed++; return; } \
    } while (0)

/* Puts back the switches a test may change (a failed CHECK returns early, before the test restores them). */
static void reset_test_switches(void);

#define RUN(test_) do { current = #test_; const int before__ = failed; reset_test_switches(); test_(); \
        if (failed == before__) { passed++; printf("ok   %s\n", #test_); } } while (0)

static void hex(const uint8_t *bytes, const size_t length, char *out)
{
    for (size_t i = 0; i < length; i++)
    {
        sprintf(out + 2 * i, "%02x", bytes[i]);
    }
}

/* ---------------------------------------------------------------- codecs */

static void sha256_matches_fips_vectors(void)
{
    uint8_t digest[32];
    char text[65];
    gt_sha256 sha;
    gt_sha256_init(&sha);
    gt_sha256_update(&sha, (const uint8_t *)"abc", 3);
    gt_sha256_final(&sha, digest);
    hex(digest, 32, text);
    CHECK(strcmp(text, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);

    gt_sha256_init(&sha);
    gt_sha256_final(&sha, digest);
    hex(digest, 32, text);
    CHECK(strcmp(text, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0);

    const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    gt_sha256_init(&sha);
    /* fed in uneven pieces to cross block boundaries */
    gt_sha256_update(&sha, (const uint8_t *)two_blocks, 5);
    gt_sha256_update(&sha, (const uint8_t *)two_blocks + 5, strlen(two_blocks) - 5);
    gt_sha256_final(&sha, digest);
    hex(digest, 32, text);
    CHECK(strcmp(text, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0);
}

static void hmac_matches_rfc4231_vectors(void)
{
    uint8_t mac[32];
    char text[65];
    gt_hmac_key key;
    uint8_t key1[20];
    memset(key1, 0x0b, sizeof(key1));
    gt_hmac_key_init(&key, key1, sizeof(key1));
    gt_hmac_sha256(&key, (const uint8_t *)"Hi There", 8, mac);
    hex(mac, 32, text);
    CHECK(strcmp(text, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7") == 0);

    gt_hmac_key_init(&key, (const uint8_t *)"Jefe", 4);
    const char *data2 = "what do ya want for nothing?";
    gt_hmac_sha256(&key, (const uint8_t *)data2, strlen(data2), mac);
    hex(mac, 32, text);
    CHECK(strcmp(text, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843") == 0);

    uint8_t key6[131];
    memset(key6, 0xaa, sizeof(key6));
    gt_hmac_key_init(&key, key6, sizeof(key6));
    const char *data6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    gt_hmac_sha256(&key, (const uint8_t *)data6, strlen(data6), mac);
    hex(mac, 32, text);
    CHECK(strcmp(text, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54") == 0);
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Nanoseconds per token check under the compression in use (a figure for the log; nothing is asserted on it). */
static double nanoseconds_per_token(const gt_hmac_key *key, const int checks)
{
    uint8_t mac[GT_MAC_LENGTH];
    memset(mac, 0, sizeof(mac));
    int accepted = 0;
    const double start = seconds_now();
    for (int i = 0; i < checks; i++)
    {
        accepted += gt_token_verify(key, GT_OP_READ, 7, (uint64_t)i * 4096, 4096, 1000, mac);
    }
    const double elapsed = seconds_now() - start;
    return accepted == 0 ? elapsed * 1e9 / checks : -1;
}

/*
 * The SHA-NI compression (where the CPU has it) and the portable one give the same digests: the FIPS and RFC 4231
 * vectors under each, and 2,000 random messages of 0..700 bytes fed in random pieces.
 */
static void sha256_implementations_agree(void)
{
    printf("     sha-256: %s\n", gt_sha256_accelerated() ? "SHA-NI compression" : "portable compression only");
    for (int portable = 1; portable >= 0; portable--)
    {
        gt_sha256_use_portable(portable);
        const int before = failed;
        sha256_matches_fips_vectors();
        hmac_matches_rfc4231_vectors();
        CHECK(failed == before);
    }
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    uint8_t message[700];
    for (int round = 0; round < 2000; round++)
    {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const size_t length = (size_t)(seed >> 33) % sizeof(message);
        for (size_t i = 0; i < length; i++)
        {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            message[i] = (uint8_t)(seed >> 56);
        }
        const size_t cut = length == 0 ? 0 : (size_t)(seed >> 20) % length;
        uint8_t digests[2][32];
        for (int portable = 0; portable < 2; portable++)
        {
            gt_sha256_use_portable(portable);
            gt_sha256 sha;
            gt_sha256_init(&sha);
            gt_sha256_update(&sha, message, cut);
            gt_sha256_update(&sha, message + cut, length - cut);
            gt_sha256_final(&sha, digests[portable]);
        }
        CHECK(memcmp(digests[0], digests[1], 32) == 0);
    }
    gt_hmac_key key;
    uint8_t secret[32];
    memset(secret, 0x5a, sizeof(secret));
    gt_hmac_key_init(&key, secret, sizeof(secret));
    gt_sha256_use_portable(1);
    const double portable_ns = nanoseconds_per_token(&key, 20000);
    gt_sha256_use_portable(0);
    const double best_ns = nanoseconds_per_token(&key, 20000);
    CHECK(portable_ns > 0 && best_ns > 0); /* a zero MAC never verifies */
    printf("     token check: %.0f ns portable, %.0f ns %s\n", portable_ns, best_ns,
        gt_sha256_accelerated() ? "SHA-NI" : "portable");
}

/* CRC32C bit by bit, with the standard inversions: the reference every implementation is held to. */
static uint32_t crc32c_reference(const uint8_t *bytes, size_t length)
{
    uint32_t c = 0xFFFFFFFFu;
    while (length-- > 0)
    {
        c ^= *bytes++;
        for (int k = 0; k < 8; k++)
        {
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
    }
    return ~c;
}

static uint32_t crc32c_of(const uint8_t *bytes, const size_t length)
{
    return ~gt_crc32c_update(0xFFFFFFFFu, bytes, length);
}

/*
 * Both updates (the SSE4.2 one where the CPU has it, and the portable one) give the reference CRC32C at lengths
 * around the six-chain loop's blocks and at every alignment, fed whole or in two pieces; and a register joined from
 * two independent halves with gt_crc32c_shift equals the register of the whole (how the engine joins slices).
 */
static void crc32c_matches_reference_and_joins(void)
{
    printf("     crc32c: %s\n", gt_crc32c_accelerated() ? "SSE4.2 crc32 instruction" : "portable update only");
    const size_t size = 70000;
    uint8_t *bytes = malloc(size);
    CHECK(bytes != NULL);
    uint64_t seed = 0x2545F4914F6CDD1Dull;
    for (size_t i = 0; i < size; i++)
    {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        bytes[i] = (uint8_t)(seed >> 56);
    }
    static const size_t lengths[] = { 0, 1, 7, 8, 9, 63, 4095, 12287, 12288, 12289, 24576, 36871, 65536, 69990 };
    for (int portable = 1; portable >= 0; portable--)
    {
        gt_crc32c_use_portable(portable);
        CHECK(crc32c_of((const uint8_t *)"123456789", 9) == 0xE3069283u); /* the check value of CRC-32C */
        for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++)
        {
            for (size_t align = 0; align < 8; align++)
            {
                const size_t length = lengths[l];
                const uint8_t *at = bytes + align;
                const uint32_t expected = crc32c_reference(at, length);
                CHECK(crc32c_of(at, length) == expected);
                const size_t cut = length / 3;
                CHECK(~gt_crc32c_update(gt_crc32c_update(0xFFFFFFFFu, at, cut), at + cut, length - cut) == expected);
                const uint32_t joined = gt_crc32c_shift(gt_crc32c_update(0xFFFFFFFFu, at, cut), length - cut) ^
                    gt_crc32c_update(0, at + cut, length - cut);
                CHECK(~joined == expected);
            }
        }
    }
    gt_crc32c_use_portable(0);
    CHECK(gt_crc32c_shift(0x12345678u, 0) == 0x12345678u);
    CHECK(gt_crc32c_shift(0, 1000) == 0);
    free(bytes);
}

static void sign_token(const gt_hmac_key *key, const int opcode, const uint32_t segment, const uint64_t offset,
    const uint64_t length, const uint32_t expiry, uint8_t token[GT_TOKEN_LENGTH])
{
    uint8_t message[32];
    uint8_t mac[32];
    gt_token_message(message, opcode, segment, offset, length, expiry);
    gt_hmac_sha256(key, message, 32, mac);
    gt_put_u32(token, expiry);
    memcpy(token + 4, mac, GT_MAC_LENGTH);
}

static void token_verifies_only_what_it_grants(void)
{
    uint8_t secret[32];
    for (int i = 0; i < 32; i++)
    {
        secret[i] = (uint8_t)(i * 7 + 1);
    }
    gt_hmac_key key;
    gt_hmac_key_init(&key, secret, 32);
    uint8_t token[GT_TOKEN_LENGTH];
    sign_token(&key, GT_OPC_READ, 77, 4096, 8192, 2000000000u, token);
    CHECK(gt_token_verify(&key, GT_OPC_READ, 77, 4096, 8192, 2000000000u, token + 4));
    CHECK(!gt_token_verify(&key, GT_OPC_WRITE, 77, 4096, 8192, 2000000000u, token + 4));
    CHECK(!gt_token_verify(&key, GT_OPC_READ, 78, 4096, 8192, 2000000000u, token + 4));
    CHECK(!gt_token_verify(&key, GT_OPC_READ, 77, 4097, 8192, 2000000000u, token + 4));
    CHECK(!gt_token_verify(&key, GT_OPC_READ, 77, 4096, 8191, 2000000000u, token + 4));
    CHECK(!gt_token_verify(&key, GT_OPC_READ, 77, 4096, 8192, 2000000001u, token + 4));
    uint8_t message[32];
    gt_token_message(message, GT_OPC_WRITE, 0x01020304u, 0x1122334455667788ull, 0x99ull, 0xA0B0C0D0u);
    CHECK(memcmp(message, "GRT1", 4) == 0 && message[4] == 2 && message[5] == 0 && message[7] == 0);
    CHECK(gt_get_u32(message + 8) == 0x01020304u && gt_get_u64(message + 12) == 0x1122334455667788ull);
    CHECK(gt_get_u64(message + 20) == 0x99ull && gt_get_u32(message + 28) == 0xA0B0C0D0u);
}

static void header_round_trips_and_rejects_bad_frames(void)
{
    gt_header h;
    memset(&h, 0, sizeof(h));
    h.opcode = GT_OPC_WRITE;
    h.request_id = 0x0102030405060708ull;
    h.segment_id = 0xFFFFFFF0u;
    h.offset = 1ull << 40;
    h.length = 65536;
    h.grant_delta = 12;
    h.grant_length = 70000;
    h.token_expiry = 1234;
    memset(h.token_mac, 0xAB, GT_MAC_LENGTH);
    uint8_t bytes[GT_HEADER_LENGTH];
    gt_header_encode(bytes, &h);
    CHECK(gt_get_u32(bytes) == 0x47524E59u && bytes[4] == 1 && bytes[5] == 2);
    CHECK(bytes[8] == 1 && bytes[15] == 8 && gt_get_u32(bytes + 16) == 0xFFFFFFF0u);
    gt_header back;
    CHECK(gt_header_decode(bytes, 1u << 20, &back) == GT_DECODE_OK);
    CHECK(back.request_id == h.request_id && back.offset == h.offset && back.length == h.length);
    CHECK(back.grant_delta == 12 && back.grant_length == 70000 && back.token_expiry == 1234);
    CHECK(gt_header_decode(bytes, 65535, &back) == GT_DECODE_BAD_LENGTH);
    bytes[5] = 0x55;
    CHECK(gt_header_decode(bytes, 1u << 20, &back) == GT_DECODE_BAD_OPCODE);
    bytes[5] = 2;
    bytes[4] = 2;
    CHECK(gt_header_decode(bytes, 1u << 20, &back) == GT_DECODE_BAD_VERSION);
    bytes[4] = 1;
    bytes[0] = 0;
    CHECK(gt_header_decode(bytes, 1u << 20, &back) == GT_DECODE_BAD_MAGIC);
    CHECK(gt_opcode_is_response(0x81) && gt_opcode_is_response(0x90) && gt_opcode_is_response(0x85) &&
        gt_opcode_is_response(0x86) && gt_opcode_is_request(0x06) && gt_opcode_is_request(0x07) &&
        gt_opcode_is_response(0x87) && !gt_opcode_is_response(0x88) && !gt_opcode_is_request(0x08));
    CHECK(gt_status_is_known(-1801) && !gt_status_is_known(-5) && !gt_status_is_known(3));
}

/* ---------------------------------------------------------------- bookkeeping */

static void regions_resolve_only_inside_live_registrations(void)
{
    gt_region_table table;
    gt_regions_init(&table);
    uint8_t memory[4096];
    uint32_t a;
    uint32_t b;
    CHECK(gt_regions_add(&table, memory, sizeof(memory), &a) == GT_OK && a != 0);
    CHECK(gt_regions_add(&table, memory + 100, 10, &b) == GT_OK && b != a);
    CHECK(gt_regions_resolve(&table, a, 0, 4096) == memory);
    CHECK(gt_regions_resolve(&table, a, 4000, 96) == memory + 4000);
    CHECK(gt_regions_resolve(&table, a, 4000, 97) == NULL);
    CHECK(gt_regions_resolve(&table, a, UINT64_MAX, 2) == NULL);
    CHECK(gt_regions_resolve(&table, b, 0, 11) == NULL);
    CHECK(gt_regions_add(&table, NULL, 10, &b) == GT_INVALID_PARAMS);
    CHECK(gt_regions_remove(&table, a) == GT_OK);
    CHECK(gt_regions_resolve(&table, a, 0, 1) == NULL);
    CHECK(gt_regions_remove(&table, a) == GT_INVALID_PARAMS);
    uint32_t c;
    CHECK(gt_regions_add(&table, memory, 10, &c) == GT_OK);
    CHECK(c != a && (c & 0xFFFFFu) == (a & 0xFFFFFu)); /* slot reused, generation differs */
    CHECK(gt_regions_resolve(&table, a, 0, 1) == NULL);
    for (int i = 0; i < 1000; i++)
    {
        uint32_t id;
        CHECK(gt_regions_add(&table, memory, 1, &id) == GT_OK);
    }
    gt_regions_free(&table);
}

/* Long-lived registrations: found for ranges inside them only, never overlapping, bounded, forgotten by start. */
static void pinned_memory_is_found_only_inside_its_range(void)
{
    gt_engine_config config;
    gt_engine_config_defaults(&config);
    gt_engine *engine = NULL;
    gt_error error;
    CHECK(gt_engine_create(&config, &engine, &error) == GT_OK);
    static uint8_t memory[1 << 16];
    uint32_t region = 0;
    uint32_t found = 0;
    uint64_t offset = 0;
    CHECK(gt_engine_pin_memory(engine, memory + 4096, 8192, &region, &error) == GT_OK);
    CHECK(gt_engine_region_count(engine) == 1);
    CHECK(gt_engine_find_pinned(engine, memory + 4096, 8192, &found, &offset) == 1 && found == region &&
        offset == 0);
    CHECK(gt_engine_find_pinned(engine, memory + 8192, 100, &found, &offset) == 1 && offset == 4096);
    CHECK(gt_engine_find_pinned(engine, memory + 4095, 2, &found, &offset) == 0);    /* starts before */
    CHECK(gt_engine_find_pinned(engine, memory + 12287, 2, &found, &offset) == 0);   /* ends after */
    CHECK(gt_engine_find_pinned(engine, memory + 4096, 8193, &found, &offset) == 0);
    CHECK(gt_engine_find_pinned(engine, memory + 4096, UINT64_MAX, &found, &offset) == 0);
    CHECK(gt_engine_pin_memory(engine, memory, 4097, &found, &error) == GT_INVALID_PARAMS); /* overlaps */
    CHECK(gt_engine_pin_memory(engine, memory + 12287, 10, &found, &error) == GT_INVALID_PARAMS);
    CHECK(gt_engine_pin_memory(engine, memory, 0, &found, &error) == GT_INVALID_PARAMS);
    CHECK(gt_engine_pin_memory(engine, memory, 4096, &found, &error) == GT_OK);     /* adjacent: fine */
    CHECK(gt_engine_unpin_memory(engine, memory + 4097) == GT_INVALID_PARAMS);      /* not a start */
    CHECK(gt_engine_unpin_memory(engine, memory + 4096) == GT_OK);
    CHECK(gt_engine_find_pinned(engine, memory + 8192, 100, &found, &offset) == 0);
    CHECK(gt_engine_unpin_memory(engine, memory + 4096) == GT_INVALID_PARAMS);
    CHECK(gt_engine_region_count(engine) == 1);
    int refused = 0;
    for (uint32_t i = 0; i < GT_MAX_PINNED + 2; i++)
    {
        refused += gt_engine_pin_memory(engine, memory + 4096 + i * 16, 16, &found, &error) == GT_UNAVAILABLE;
    }
    CHECK(refused == 3); /* one pin was there already */
    gt_engine_destroy(engine);
}

static void segment_memory_is_aligned_zeroed_and_unmapped(void)
{
    gt_error error;
    void *address = NULL;
    uint64_t mapped = 0;
    for (int huge = 0; huge <= 1; huge++)
    {
        const int result = gt_memory_map(3 * GT_HUGE_PAGE_BYTES + 1, huge, &address, &mapped, &error);
        if (huge && result == GT_UNAVAILABLE)
        {
            printf("     kernel refuses MADV_HUGEPAGE (%s): huge mapping not checked\n", error.message);
            continue;
        }
        CHECK(result == GT_OK);
        CHECK(address != NULL && ((uintptr_t)address & (GT_HUGE_PAGE_BYTES - 1)) == 0);
        CHECK(mapped == 4ull * GT_HUGE_PAGE_BYTES);
        uint8_t *bytes = address;
        int zero = 1;
        for (uint64_t i = 0; i < mapped; i += 4096)
        {
            zero &= bytes[i] == 0 && bytes[i + 4095] == 0;
        }
        CHECK(zero);
        memset(bytes, 0xA5, mapped); /* every byte writable, the last one included */
        CHECK(bytes[mapped - 1] == 0xA5);
        CHECK(gt_memory_unmap(bytes + 4096, mapped) == GT_INVALID_PARAMS);  /* not a start it returned */
        CHECK(gt_memory_unmap(address, mapped - 1) == GT_INVALID_PARAMS);   /* not a length it returned */
        CHECK(gt_memory_unmap(address, mapped) == GT_OK);
    }
    CHECK(gt_memory_map(0, 0, &address, &mapped, &error) == GT_INVALID_PARAMS && address == NULL && mapped == 0);
    CHECK(strstr(error.message, "mapping length") != NULL);
    CHECK(gt_memory_map(GT_MAX_MAPPING_BYTES + 1, 1, &address, &mapped, &error) == GT_INVALID_PARAMS);
    CHECK(gt_memory_map(4096, 0, NULL, &mapped, &error) == GT_INVALID_PARAMS);
    CHECK(gt_memory_unmap(NULL, GT_HUGE_PAGE_BYTES) == GT_INVALID_PARAMS);
}

static void qp_info_round_trips_and_rejects_garbage(void)
{
    gt_qp_info info;
    memset(&info, 0, sizeof(info));
    info.lid = 0x1234;
    info.port = 1;
    info.mtu = 5;
    info.qp_num = 0xABCDEF;
    info.psn = 0x123456;
    for (int i = 0; i < 16; i++)
    {
        info.gid[i] = (uint8_t)(0xF0 + i);
    }
    info.segment_id = 0xDEADBEEFu;
    info.segment_address = 0x7F0000001000ull;
    info.segment_length = 1ull << 30;
    info.rkey = 0x55AA55AAu;
    uint8_t bytes[GT_QP_INFO_LENGTH];
    gt_qp_info_encode(bytes, &info);
    CHECK(gt_get_u32(bytes) == GT_QP_INFO_MAGIC && bytes[4] == GT_QP_INFO_VERSION);
    gt_qp_info back;
    CHECK(gt_qp_info_decode(bytes, &back) == GT_OK);
    CHECK(back.lid == info.lid && back.port == 1 && back.mtu == 5 && back.qp_num == info.qp_num);
    CHECK(back.psn == info.psn && memcmp(back.gid, info.gid, 16) == 0 && back.segment_id == info.segment_id);
    CHECK(back.segment_address == info.segment_address && back.segment_length == info.segment_length);
    CHECK(back.rkey == info.rkey);
    uint8_t bad[GT_QP_INFO_LENGTH];
    memcpy(bad, bytes, sizeof(bad));
    bad[0] ^= 1;
    CHECK(gt_qp_info_decode(bad, &back) == GT_INVALID_PARAMS);
    memcpy(bad, bytes, sizeof(bad));
    bad[12] = 1; /* QP number above 24 bits */
    CHECK(gt_qp_info_decode(bad, &back) == GT_INVALID_PARAMS);
    memcpy(bad, bytes, sizeof(bad));
    bad[63] = 1; /* padding */
    CHECK(gt_qp_info_decode(bad, &back) == GT_INVALID_PARAMS);
    memcpy(bad, bytes, sizeof(bad));
    bad[6] = 0; /* not an ibv_mtu */
    CHECK(gt_qp_info_decode(bad, &back) == GT_INVALID_PARAMS);
    bad[6] = 6;
    CHECK(gt_qp_info_decode(bad, &back) == GT_INVALID_PARAMS);
    memcpy(bad, bytes, sizeof(bad));
    gt_put_u64(bad + 44, UINT64_MAX - 10); /* address + length wraps */
    CHECK(gt_qp_info_decode(bad, &back) == GT_INVALID_PARAMS);
}

static void mr_table_finds_the_covering_registration(void)
{
    gt_mr_table table;
    gt_mr_table_init(&table);
    gt_mr_entry a = { .address = 0x10000, .length = 0x1000, .lkey = 1, .rkey = 11 };
    gt_mr_entry b = { .address = 0x30000, .length = 0x2000, .lkey = 2, .rkey = 22 };
    gt_mr_entry overlapping = { .address = 0x10800, .length = 0x1000, .lkey = 3 };
    gt_mr_entry before = { .address = 0x0F800, .length = 0x1000, .lkey = 4 };
    CHECK(gt_mr_table_add(&table, &b) == GT_OK);
    CHECK(gt_mr_table_add(&table, &a) == GT_OK);
    CHECK(gt_mr_table_add(&table, &overlapping) == GT_INVALID_PARAMS);
    CHECK(gt_mr_table_add(&table, &before) == GT_INVALID_PARAMS);
    const gt_mr_entry *found = gt_mr_table_find(&table, 0x10010, 0x100);
    CHECK(found != NULL && found->lkey == 1);
    found = gt_mr_table_find(&table, 0x31000, 0x1000);
    CHECK(found != NULL && found->rkey == 22);
    CHECK(gt_mr_table_find(&table, 0x31000, 0x1001) == NULL);
    CHECK(gt_mr_table_find(&table, 0x20000, 1) == NULL);
    CHECK(gt_mr_table_find(&table, 0x0FFFF, 2) == NULL);
    gt_mr_entry removed;
    CHECK(gt_mr_table_remove(&table, 0x10000, &removed) == GT_OK && removed.rkey == 11);
    CHECK(gt_mr_table_find(&table, 0x10010, 1) == NULL);
    CHECK(gt_mr_table_remove(&table, 0x10000, NULL) == GT_INVALID_PARAMS);
    gt_mr_table_free(&table);
}

static void plan_splits_ops_into_signalled_chains(void)
{
    gt_rdma_op ops[3] = {
        { .opcode = GT_OP_WRITE, .local_address = 0x1000, .lkey = 1, .remote_address = 0x90000, .rkey = 9,
          .length = 2500 },
        { .opcode = GT_OP_READ, .local_address = 0x8000, .lkey = 1, .remote_address = 0xA0000, .rkey = 9,
          .length = 1000 },
        { .opcode = GT_OP_READ, .local_address = 0xC000, .lkey = 2, .remote_address = 0xB0000, .rkey = 8,
          .length = 1024 },
    };
    gt_rdma_wr wrs[16];
    const int n = gt_rdma_plan(ops, 3, 1024, 2, wrs, 16);
    CHECK(n == 5); /* 1024 + 1024 + 452, 1000, 1024 */
    CHECK(wrs[0].length == 1024 && wrs[1].length == 1024 && wrs[2].length == 452);
    CHECK(wrs[1].local_address == 0x1400 && wrs[1].remote_address == 0x90400);
    CHECK(wrs[2].wr_id == 2 && wrs[3].wr_id == (1ull << 32));
    CHECK(wrs[0].chain == 0 && wrs[1].chain == 0 && wrs[2].chain == 1 && wrs[3].chain == 1 && wrs[4].chain == 2);
    CHECK(!wrs[0].signaled && wrs[1].signaled); /* end of chain 0 */
    CHECK(wrs[2].signaled && wrs[3].signaled && wrs[4].signaled); /* ends of ops */
    CHECK(wrs[4].lkey == 2 && wrs[4].rkey == 8 && wrs[3].opcode == GT_OP_READ);
    CHECK(gt_rdma_plan(ops, 3, 1024, 2, wrs, 4) == GT_UNAVAILABLE);
    gt_rdma_op empty = { .opcode = GT_OP_READ, .length = 0 };
    CHECK(gt_rdma_plan(&empty, 1, 1024, 2, wrs, 16) == GT_INVALID_PARAMS);
    CHECK(gt_rdma_plan(ops, 3, 0, 2, wrs, 16) == GT_INVALID_PARAMS);
}

static void rdma_reports_why_it_is_unavailable(void)
{
    gt_error error = { 0, "" };
    const int available = gt_rdma_available(&error);
    if (!available)
    {
        CHECK(error.code == GT_UNAVAILABLE && strlen(error.message) > 10);
        printf("     rdma unavailable: %s\n", error.message);
    }
    CHECK(strstr(gt_version(), "granary-transfer") != NULL);
}

/* ---------------------------------------------------------------- loopback client and server */

#define SEGMENT_BYTES (8u << 20)
#define SEGMENT_ID 0x5EEDu

typedef struct test_node
{
    gt_server *server;
    pthread_t thread;
    uint8_t *segment;
    int writes;
    int commits;
    uint8_t last_commit[256];
    uint32_t last_commit_length;
    int last_failed_status;
    int last_token_status;
    int closes_with_reason;
    int vector_upcalls;      /* on_writes / on_commits calls (nodes made with node_vector_upcalls) */
    pthread_mutex_t mutex;
} test_node;

static int node_on_write(void *context, uint32_t segment_id, uint64_t offset, uint32_t length)
{
    test_node *node = context;
    pthread_mutex_lock(&node->mutex);
    node->writes++;
    pthread_mutex_unlock(&node->mutex);
    return GT_OK;
}

static int node_on_commit(void *context, const uint8_t *header, const uint8_t *payload, uint32_t length,
    int failed_write_status, int token_status)
{
    test_node *node = context;
    pthread_mutex_lock(&node->mutex);
    node->commits++;
    node->last_failed_status = failed_write_status;
    node->last_token_status = token_status;
    node->last_commit_length = length;
    if (payload != NULL && length <= sizeof(node->last_commit))
    {
        memcpy(node->last_commit, payload, length);
    }
    pthread_mutex_unlock(&node->mutex);
    if (failed_write_status != 0)
    {
        return failed_write_status;
    }
    return payload == NULL ? GT_INVALID_PARAMS : GT_OK;
}

/* A WRITEV's WRITE parts at once: each as node_on_write. */
static void node_on_writes(void *context, const uint32_t count, const uint32_t *segment_ids, const uint64_t *offsets,
    const uint32_t *lengths, int32_t *statuses)
{
    test_node *node = context;
    pthread_mutex_lock(&node->mutex);
    node->vector_upcalls++;
    pthread_mutex_unlock(&node->mutex);
    for (uint32_t i = 0; i < count; i++)
    {
        statuses[i] = node_on_write(context, segment_ids[i], offsets[i], lengths[i]);
    }
}

/* A WRITEV's COMMITs at once: each as node_on_commit (its header read, so that ASan sees every one is there). */
static void node_on_commits(void *context, const uint32_t count, const uint8_t *headers, const uint8_t *const *records,
    const uint32_t *record_lengths, const int32_t *token_statuses, int32_t *statuses)
{
    test_node *node = context;
    pthread_mutex_lock(&node->mutex);
    node->vector_upcalls++;
    pthread_mutex_unlock(&node->mutex);
    for (uint32_t i = 0; i < count; i++)
    {
        gt_header h;
        const int decoded = gt_header_decode(headers + (size_t)i * GT_HEADER_LENGTH, GT_MAX_FRAME_LENGTH_LIMIT, &h);
        statuses[i] = decoded != GT_DECODE_OK || h.opcode != GT_OPC_COMMIT || h.length != record_lengths[i] ?
            GT_INTERNAL_ERROR : node_on_commit(context, headers + (size_t)i * GT_HEADER_LENGTH, records[i],
            record_lengths[i], 0, token_statuses[i]);
    }
}

static void node_on_close(void *context, const char *peer, const char *reason)
{
    test_node *node = context;
    if (reason != NULL)
    {
        pthread_mutex_lock(&node->mutex);
        node->closes_with_reason++;
        pthread_mutex_unlock(&node->mutex);
    }
}

static void *node_run(void *argument)
{
    test_node *node = argument;
    gt_error error;
    gt_server_run(node->server, &error);
    return NULL;
}

static int node_start_loops(test_node *node, uint16_t port, uint32_t loops);

static int node_start(test_node *node)
{
    return node_start_loops(node, 0, 1);
}

static int node_start_on(test_node *node, const uint16_t port)
{
    return node_start_loops(node, port, 1);
}

/* LOCAL_CONNECT answered by the nodes the next node_start* makes (off unless a same-host test turns it on). */
static uint32_t node_local_transfers = 0;
/* The nodes the next node_start* makes take a WRITEV's entries in one on_writes / on_commits call each. */
static int node_vector_upcalls = 0;

static int node_start_loops(test_node *node, const uint16_t port, const uint32_t loops)
{
    memset(node, 0, sizeof(*node));
    pthread_mutex_init(&node->mutex, NULL);
    node->segment = aligned_alloc(4096, SEGMENT_BYTES);
    if (node->segment == NULL)
    {
        return 0;
    }
    memset(node->segment, 0, SEGMENT_BYTES);
    gt_server_config config = { .host = "127.0.0.1", .port = port, .max_frame_bytes = 16u << 20,
        .io_threads = loops, .local_transfers = node_local_transfers };
    gt_server_callbacks callbacks = { .context = node, .on_write = node_on_write, .on_commit = node_on_commit,
        .on_close = node_on_close, .on_writes = node_vector_upcalls ? node_on_writes : NULL,
        .on_commits = node_vector_upcalls ? node_on_commits : NULL };
    gt_error error;
    if (gt_server_create(&config, &callbacks, &node->server, &error) != GT_OK)
    {
        fprintf(stderr, "server: %s\n", error.message);
        free(node->segment);
        return 0;
    }
    const uint32_t id = SEGMENT_ID;
    const uint64_t address = (uint64_t)(uintptr_t)node->segment;
    const uint64_t size = SEGMENT_BYTES;
    gt_server_set_segments(node->server, &id, &address, &size, 1, &error);
    pthread_create(&node->thread, NULL, node_run, node);
    return 1;
}

static void node_stop(test_node *node)
{
    gt_server_stop(node->server);
    pthread_join(node->thread, NULL);
    gt_server_destroy(node->server);
    free(node->segment);
    pthread_mutex_destroy(&node->mutex);
}

/* Same-host transfers in the engines the next client* makes: off unless a same-host test turns them on, so that the
 * other tests see every byte and every frame over TCP (the default is on). */
static uint32_t client_local_transfers = 0;

static void reset_test_switches(void)
{
    node_local_transfers = 0;
    node_vector_upcalls = 0;
    client_local_transfers = 0;
}

/* A client engine; write_commits 0 sends a one-frame WRITE and its COMMIT as two frames (the default sends one). */
static gt_engine *client_with(const uint32_t slice_bytes, const uint64_t timeout_ms, const uint32_t write_commits)
{
    gt_engine_config config;
    gt_engine_config_defaults(&config);
    config.local_transfers = client_local_transfers;
    config.slice_bytes = slice_bytes;
    config.transfer_timeout_ms = timeout_ms;
    config.write_commits = write_commits;
    gt_engine *engine = NULL;
    gt_error error;
    if (gt_engine_create(&config, &engine, &error) != GT_OK)
    {
        fprintf(stderr, "engine: %s\n", error.message);
    }
    return engine;
}

static gt_engine *client(const uint32_t slice_bytes, const uint64_t timeout_ms)
{
    return client_with(slice_bytes, timeout_ms, 1);
}

/* A client engine (as client_with() makes it) connected to the test node, its peer id in *peer; NULL on failure. */
static gt_engine *connected_client_with(test_node *node, const uint32_t slice_bytes, const uint64_t timeout_ms,
    const uint32_t write_commits, uint32_t *peer)
{
    gt_engine *engine = client_with(slice_bytes, timeout_ms, write_commits);
    gt_error error;
    if (engine != NULL && gt_engine_connect(engine, "127.0.0.1", gt_server_port(node->server), peer, &error) != GT_OK)
    {
        fprintf(stderr, "connect: %s\n", error.message);
        gt_engine_destroy(engine);
        engine = NULL;
    }
    return engine;
}

static gt_engine *connected_client(test_node *node, const uint32_t slice_bytes, const uint64_t timeout_ms,
    uint32_t *peer)
{
    return connected_client_with(node, slice_bytes, timeout_ms, 1, peer);
}

/* Polls until every one of count operations completed (or the deadline); returns how many did. */
static int await(gt_engine *engine, gt_completion *done, const int count, const uint64_t deadline_ms)
{
    int have = 0;
    const uint64_t until = gt_now_ms() + deadline_ms;
    while (have < count && gt_now_ms() < until)
    {
        const int n = gt_engine_poll(engine, done + have, count - have, 10);
        if (n < 0)
        {
            return have;
        }
        have += n;
    }
    return have;
}

/* The node's bytes_out once it reached at_least (or at the deadline): the node counts a send after it returned, so a
 * client can hold every byte of an answer before the count moves. */
static uint64_t await_bytes_out(gt_server *server, const uint64_t at_least, const uint64_t deadline_ms)
{
    const uint64_t until = gt_now_ms() + deadline_ms;
    gt_server_stats stats;
    gt_server_get_stats(server, &stats);
    while (stats.bytes_out < at_least && gt_now_ms() < until)
    {
        usleep(1000);
        gt_server_get_stats(server, &stats);
    }
    return stats.bytes_out;
}

static int32_t status_of(const gt_completion *done, const int count, const uint64_t user_data)
{
    for (int i = 0; i < count; i++)
    {
        if (done[i].user_data == user_data)
        {
            return done[i].status;
        }
    }
    return 12345;
}

static gt_op op_of(const uint64_t user_data, const uint32_t peer, const uint8_t opcode, const uint32_t region,
    const uint64_t local_offset, const uint32_t length, const uint64_t remote_offset)
{
    gt_op op;
    memset(&op, 0, sizeof(op));
    op.user_data = user_data;
    op.peer = peer;
    op.opcode = opcode;
    op.region = region;
    op.local_offset = local_offset;
    op.length = length;
    op.segment_id = SEGMENT_ID;
    op.remote_offset = remote_offset;
    op.grant_offset = remote_offset;
    op.grant_length = length;
    return op;
}

static void fill_pattern(uint8_t *bytes, const size_t length, const uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < length; i++)
    {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        bytes[i] = (uint8_t)x;
    }
}

/* Registers the source and destination buffers of a test's transfers; 1 when both are. */
static int register_both(gt_engine *engine, uint8_t *out, uint8_t *in, const uint32_t length, uint32_t *out_region,
    uint32_t *in_region)
{
    gt_error error;
    return gt_engine_register_memory(engine, out, length, out_region, &error) == GT_OK &&
        gt_engine_register_memory(engine, in, length, in_region, &error) == GT_OK;
}

static void loopback_moves_every_byte(void)
{
    test_node node;
    CHECK(node_start(&node));
    gt_engine *engine = client(64u << 10, 5000);
    CHECK(engine != NULL);
    uint32_t peer;
    gt_error error;
    CHECK(gt_engine_connect(engine, "127.0.0.1", gt_server_port(node.server), &peer, &error) == GT_OK);
    const uint32_t length = (3u << 20) + 12345; /* sliced into 64 KiB frames over two lanes */
    uint8_t *out = malloc(length);
    uint8_t *in = calloc(1, length);
    fill_pattern(out, length, 7);
    uint32_t out_region;
    uint32_t in_region;
    CHECK(register_both(engine, out, in, length, &out_region, &in_region));
    gt_op write = op_of(1, peer, GT_OP_WRITE, out_region, 0, length, 4096);
    CHECK(gt_engine_submit(engine, &write, 1, &error) == 1);
    gt_completion done[8];
    CHECK(await(engine, done, 1, 5000) == 1);
    CHECK(done[0].user_data == 1 && done[0].status == GT_OK);
    CHECK(memcmp(node.segment + 4096, out, length) == 0);
    gt_op read = op_of(2, peer, GT_OP_READ, in_region, 0, length, 4096);
    CHECK(gt_engine_submit(engine, &read, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1);
    CHECK(done[0].user_data == 2 && done[0].status == GT_OK);
    CHECK(memcmp(in, out, length) == 0);

    /* refusals: a range outside the segment, an unknown segment, local memory outside the region */
    gt_op outside = op_of(3, peer, GT_OP_READ, in_region, 0, 4096, SEGMENT_BYTES - 100);
    gt_op unknown = op_of(4, peer, GT_OP_READ, in_region, 0, 4096, 0);
    unknown.segment_id = 99;
    gt_op local_outside = op_of(5, peer, GT_OP_READ, in_region, length - 10, 4096, 0);
    gt_op refused_write = op_of(6, peer, GT_OP_WRITE, out_region, 0, 8192, SEGMENT_BYTES - 4096);
    gt_op batch[4] = { outside, unknown, local_outside, refused_write };
    CHECK(gt_engine_submit(engine, batch, 4, &error) == 4);
    CHECK(await(engine, done, 4, 5000) == 4);
    CHECK(status_of(done, 4, 3) == GT_INVALID_PARAMS);
    CHECK(status_of(done, 4, 4) == GT_SEGMENT_NOT_FOUND);
    CHECK(status_of(done, 4, 5) == GT_INVALID_PARAMS);
    CHECK(status_of(done, 4, 6) == GT_INVALID_PARAMS);
    /* the lanes are still in sync after the refused WRITE's payload was discarded */
    memset(in, 0, length);
    gt_op again = op_of(7, peer, GT_OP_READ, in_region, 0, 100000, 4096);
    CHECK(gt_engine_submit(engine, &again, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    CHECK(memcmp(in, out, 100000) == 0);
    gt_engine_destroy(engine);
    free(out);
    free(in);
    node_stop(&node);
}

static uint32_t crc_of(const gt_completion *done, const int count, const uint64_t user_data, int *has)
{
    for (int i = 0; i < count; i++)
    {
        if (done[i].user_data == user_data)
        {
            *has = done[i].has_crc32c;
            return done[i].crc32c;
        }
    }
    *has = -1;
    return 0;
}

/*
 * A READ with GT_OP_FLAG_CRC32C completes with the CRC32C of the bytes it delivered: a value sliced over two lanes
 * (slices joined in whatever order they came), small reads that leave together as a READV, the bytes a node changed
 * behind the writer's back (the CRC is of what arrived); without the flag, or when the READ fails, there is none.
 */
static void reads_carry_the_crc32c_of_their_bytes(void)
{
    test_node node;
    CHECK(node_start(&node));
    uint32_t peer;
    gt_engine *engine = connected_client(&node, 64u << 10, 5000, &peer);
    CHECK(engine != NULL);
    gt_error error;
    const uint32_t length = (3u << 20) + 12345;
    uint8_t *out = malloc(length);
    uint8_t *in = calloc(1, length);
    fill_pattern(out, length, 11);
    uint32_t out_region;
    uint32_t in_region;
    CHECK(register_both(engine, out, in, length, &out_region, &in_region));
    gt_op write = op_of(1, peer, GT_OP_WRITE, out_region, 0, length, 4096);
    write.flags |= GT_OP_FLAG_CRC32C; /* means nothing to a WRITE */
    gt_completion done[16];
    CHECK(gt_engine_submit(engine, &write, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK && done[0].has_crc32c == 0);
    const uint32_t whole = crc32c_reference(out, length);

    gt_op sliced = op_of(2, peer, GT_OP_READ, in_region, 0, length, 4096);
    sliced.flags |= GT_OP_FLAG_CRC32C;
    gt_op plain = op_of(3, peer, GT_OP_READ, in_region, 0, 100000, 4096);
    CHECK(gt_engine_submit(engine, &sliced, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    CHECK(done[0].has_crc32c == 1 && done[0].crc32c == whole);
    CHECK(memcmp(in, out, length) == 0);
    CHECK(gt_engine_submit(engine, &plain, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK && done[0].has_crc32c == 0);

    /* slices above the READV entry size travel as plain READs, each checksummed while its payload arrives */
    uint32_t big_peer;
    gt_engine *big = connected_client(&node, 256u << 10, 5000, &big_peer);
    CHECK(big != NULL);
    uint32_t big_region;
    CHECK(gt_engine_register_memory(big, in, length, &big_region, &error) == GT_OK);
    memset(in, 0, length);
    gt_op big_read = op_of(4, big_peer, GT_OP_READ, big_region, 0, length, 4096);
    big_read.flags |= GT_OP_FLAG_CRC32C;
    CHECK(gt_engine_submit(big, &big_read, 1, &error) == 1);
    CHECK(await(big, done, 1, 5000) == 1 && done[0].status == GT_OK);
    CHECK(done[0].has_crc32c == 1 && done[0].crc32c == whole);
    CHECK(memcmp(in, out, length) == 0);
    gt_engine_destroy(big);

    /* eight small reads in one batch: they share READV frames; each gets the CRC32C of its own bytes */
    gt_op small[8];
    for (int i = 0; i < 8; i++)
    {
        small[i] = op_of(10 + (uint64_t)i, peer, GT_OP_READ, in_region, (uint64_t)i * 8192, 1000u + 777u * (uint32_t)i,
            4096 + (uint64_t)i * 8192);
        small[i].flags |= GT_OP_FLAG_CRC32C;
    }
    CHECK(gt_engine_submit(engine, small, 8, &error) == 8);
    CHECK(await(engine, done, 8, 5000) == 8);
    for (int i = 0; i < 8; i++)
    {
        int has = 0;
        const uint32_t crc = crc_of(done, 8, 10 + (uint64_t)i, &has);
        CHECK(status_of(done, 8, 10 + (uint64_t)i) == GT_OK && has == 1);
        CHECK(crc == crc32c_reference(out + (size_t)i * 8192, 1000u + 777u * (uint32_t)i));
    }

    /* a byte the node changed: the CRC32C is of what arrived, so a caller comparing it with the put's sees the change */
    node.segment[4096 + 200000] ^= 0x40;
    CHECK(gt_engine_submit(engine, &sliced, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK && done[0].has_crc32c == 1);
    CHECK(done[0].crc32c != whole && done[0].crc32c == crc32c_reference(in, length));

    /* a READ that fails carries none */
    gt_op unknown = op_of(20, peer, GT_OP_READ, in_region, 0, 4096, 0);
    unknown.segment_id = 99;
    unknown.flags |= GT_OP_FLAG_CRC32C;
    CHECK(gt_engine_submit(engine, &unknown, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_SEGMENT_NOT_FOUND && done[0].has_crc32c == 0);
    gt_engine_destroy(engine);
    free(out);
    free(in);
    node_stop(&node);
}

static void tokens_are_checked_before_bytes_move(void)
{
    test_node node;
    CHECK(node_start(&node));
    uint8_t secret[32];
    memset(secret, 0x42, sizeof(secret));
    gt_error error;
    CHECK(gt_server_set_token_key(node.server, secret, &error) == GT_OK);
    gt_hmac_key key;
    gt_hmac_key_init(&key, secret, 32);
    gt_engine *engine = client(4096, 5000);
    uint32_t peer;
    CHECK(gt_engine_connect(engine, "127.0.0.1", gt_server_port(node.server), &peer, &error) == GT_OK);
    uint8_t data[10000];
    fill_pattern(data, sizeof(data), 3);
    uint32_t region;
    CHECK(gt_engine_register_memory(engine, data, sizeof(data), &region, &error) == GT_OK);
    const uint32_t expiry = (uint32_t)(gt_epoch_ms() / 1000 + 600);

    /* a WRITE token for an extent of 20000 bytes at 8192; the write covers part of it, sliced by 4096 */
    gt_op granted = op_of(1, peer, GT_OP_WRITE, region, 0, sizeof(data), 8192 + 1000);
    granted.has_token = 1;
    granted.grant_offset = 8192;
    granted.grant_length = 20000;
    sign_token(&key, GT_OPC_WRITE, SEGMENT_ID, 8192, 20000, expiry, granted.token);
    gt_op no_token = op_of(2, peer, GT_OP_WRITE, region, 0, 100, 0);
    gt_op wrong_op = granted;
    wrong_op.user_data = 3;
    wrong_op.opcode = GT_OP_READ;
    gt_op expired = granted;
    expired.user_data = 4;
    sign_token(&key, GT_OPC_WRITE, SEGMENT_ID, 8192, 20000, 1000, expired.token);
    gt_op batch[4] = { granted, no_token, wrong_op, expired };
    CHECK(gt_engine_submit(engine, batch, 4, &error) == 4);
    gt_completion done[4];
    CHECK(await(engine, done, 4, 5000) == 4);
    CHECK(status_of(done, 4, 1) == GT_OK);
    CHECK(status_of(done, 4, 2) == GT_ACCESS_DENIED);
    CHECK(status_of(done, 4, 3) == GT_ACCESS_DENIED);
    CHECK(status_of(done, 4, 4) == GT_TOKEN_EXPIRED);
    CHECK(memcmp(node.segment + 9192, data, sizeof(data)) == 0);
    CHECK(node.segment[0] == 0); /* the refused write moved nothing */
    gt_server_stats stats;
    gt_server_get_stats(node.server, &stats);
    /* 10000 bytes in 4096-byte slices: three frames each, all inside the window */
    CHECK(stats.tokens_verified == 3 && stats.tokens_missing == 1 && stats.tokens_invalid == 3 &&
        stats.tokens_expired == 3);
    gt_engine_destroy(engine);
    node_stop(&node);
}

/* COMMIT frames of their own (write_commits 0; a late payload is sent apart whatever the setting). */
static void commit_follows_its_write_and_may_come_later(void)
{
    test_node node;
    CHECK(node_start(&node));
    uint32_t peer;
    gt_error error;
    gt_engine *engine = connected_client_with(&node, 1u << 20, 5000, 0, &peer);
    CHECK(engine != NULL);
    uint8_t data[5000];
    fill_pattern(data, sizeof(data), 11);
    uint32_t region;
    CHECK(gt_engine_register_memory(engine, data, sizeof(data), &region, &error) == GT_OK);
    const uint8_t record[6] = { 1, 2, 3, 4, 5, 6 };
    gt_op with_commit = op_of(1, peer, GT_OP_WRITE, region, 0, sizeof(data), 0);
    with_commit.commit = record;
    with_commit.commit_length = sizeof(record);
    CHECK(gt_engine_submit(engine, &with_commit, 1, &error) == 1);
    gt_completion done[2];
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    CHECK(node.commits == 1 && node.last_commit_length == 6 && memcmp(node.last_commit, record, 6) == 0);
    CHECK(node.last_token_status == GT_COMMIT_TOKEN_UNCHECKED); /* six bytes are no record: the owner checks */

    gt_op later = op_of(2, peer, GT_OP_WRITE, region, 0, sizeof(data), 65536);
    later.flags = GT_OP_FLAG_COMMIT_LATER;
    CHECK(gt_engine_submit(engine, &later, 1, &error) == 1);
    /* the WRITE completes on the wire, but the transfer waits for its COMMIT */
    CHECK(await(engine, done, 1, 300) == 0);
    const uint8_t late_record[3] = { 9, 8, 7 };
    CHECK(gt_engine_provide_commit(engine, 2, late_record, 3, &error) == GT_OK);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].user_data == 2 && done[0].status == GT_OK);
    CHECK(node.commits == 2 && node.last_commit_length == 3 && memcmp(node.last_commit, late_record, 3) == 0);
    CHECK(gt_engine_provide_commit(engine, 2, late_record, 3, &error) == GT_INVALID_PARAMS);
    /* a record that could not be made: no COMMIT, the transfer fails */
    gt_op unmade = op_of(4, peer, GT_OP_WRITE, region, 0, sizeof(data), 131072);
    unmade.flags = GT_OP_FLAG_COMMIT_LATER;
    CHECK(gt_engine_submit(engine, &unmade, 1, &error) == 1);
    CHECK(gt_engine_provide_commit(engine, 4, NULL, 0, &error) == GT_OK);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].user_data == 4 && done[0].status == GT_INTERNAL_ERROR);
    CHECK(node.commits == 2);

    /* a refused WRITE: its pipelined COMMIT is refused with the WRITE's status */
    gt_op refused = op_of(3, peer, GT_OP_WRITE, region, 0, sizeof(data), SEGMENT_BYTES - 10);
    refused.commit = record;
    refused.commit_length = sizeof(record);
    CHECK(gt_engine_submit(engine, &refused, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_INVALID_PARAMS);
    CHECK(node.commits == 3 && node.last_failed_status == GT_INVALID_PARAMS);

    /*
     * Payloads of late-commit WRITEs in any order: the waiting list keeps submission order and a tail, which must
     * follow removals from its end and its middle; each transfer completes only once its own payload came.
     */
    gt_op batch[4];
    for (int i = 0; i < 4; i++)
    {
        batch[i] = op_of((uint64_t)(10 + i), peer, GT_OP_WRITE, region, 0, sizeof(data), 196608 + (uint64_t)i * 8192);
        batch[i].flags = GT_OP_FLAG_COMMIT_LATER;
    }
    CHECK(gt_engine_submit(engine, batch, 4, &error) == 4);
    /* the last first: the list's tail moves back to the third */
    CHECK(gt_engine_provide_commit(engine, 13, late_record, 3, &error) == GT_OK);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].user_data == 13 && done[0].status == GT_OK);
    /* one submitted now goes behind the third, not behind the gone fourth */
    gt_op fifth = op_of(14, peer, GT_OP_WRITE, region, 0, sizeof(data), 196608 + 4 * 8192);
    fifth.flags = GT_OP_FLAG_COMMIT_LATER;
    CHECK(gt_engine_submit(engine, &fifth, 1, &error) == 1);
    /* a middle one, then the first */
    CHECK(gt_engine_provide_commit(engine, 11, late_record, 3, &error) == GT_OK);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].user_data == 11 && done[0].status == GT_OK);
    CHECK(gt_engine_provide_commit(engine, 10, late_record, 3, &error) == GT_OK);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].user_data == 10 && done[0].status == GT_OK);
    CHECK(gt_engine_provide_commit(engine, 14, late_record, 3, &error) == GT_OK);
    CHECK(gt_engine_provide_commit(engine, 12, late_record, 3, &error) == GT_OK);
    CHECK(await(engine, done, 2, 5000) == 2 && status_of(done, 2, 12) == GT_OK && status_of(done, 2, 14) == GT_OK);
    CHECK(gt_engine_provide_commit(engine, 12, late_record, 3, &error) == GT_INVALID_PARAMS);
    CHECK(node.commits == 8);
    /* the list emptied: a new one is found again */
    gt_op sixth = op_of(15, peer, GT_OP_WRITE, region, 0, sizeof(data), 196608 + 5 * 8192);
    sixth.flags = GT_OP_FLAG_COMMIT_LATER;
    CHECK(gt_engine_submit(engine, &sixth, 1, &error) == 1);
    CHECK(gt_engine_provide_commit(engine, 15, late_record, 3, &error) == GT_OK);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].user_data == 15 && done[0].status == GT_OK);
    CHECK(node.commits == 9);
    gt_engine_destroy(engine);
    node_stop(&node);
}

/* A WRITE of the region's first length bytes to at, under a token of opcode granting exactly [at, at + length). */
static gt_op token_write(const uint64_t id, const uint32_t peer, const uint32_t region, const uint32_t length,
    const uint64_t at, const gt_hmac_key *key, const int opcode, const uint32_t expiry)
{
    gt_op write = op_of(id, peer, GT_OP_WRITE, region, 0, length, at);
    write.has_token = 1;
    write.grant_offset = at;
    write.grant_length = length;
    sign_token(key, opcode, SEGMENT_ID, at, length, expiry, write.token);
    return write;
}

/*
 * A COMMIT's token is checked by the server as the WRITE token of the extent its record commits (COMMIT frames of
 * their own here: write_commits 0; write_commit_carries_its_record_in_one_frame covers the WRITE_COMMIT).
 */
static void commit_token_is_checked_as_the_write_token_of_its_extent(void)
{
    test_node node;
    CHECK(node_start(&node));
    uint8_t secret[32];
    memset(secret, 0x24, sizeof(secret));
    gt_error error;
    gt_hmac_key key;
    gt_hmac_key_init(&key, secret, 32);
    gt_engine *engine = client_with(1u << 20, 5000, 0);
    uint32_t peer;
    CHECK(gt_engine_connect(engine, "127.0.0.1", gt_server_port(node.server), &peer, &error) == GT_OK);
    uint8_t data[5000];
    fill_pattern(data, sizeof(data), 5);
    uint32_t region;
    CHECK(gt_engine_register_memory(engine, data, sizeof(data), &region, &error) == GT_OK);
    const uint32_t expiry = (uint32_t)(gt_epoch_ms() / 1000 + 600);
    uint8_t record[40] = { 0 };
    record[0] = 1; /* format; the server reads only the format and the value length */
    gt_completion done[2];

    /* no key: nothing to check */
    gt_put_u64(record + 8, sizeof(data));
    gt_op plain = op_of(1, peer, GT_OP_WRITE, region, 0, sizeof(data), 0);
    plain.commit = record;
    plain.commit_length = sizeof(record);
    CHECK(gt_engine_submit(engine, &plain, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    CHECK(node.commits == 1 && node.last_token_status == GT_OK);

    CHECK(gt_server_set_token_key(node.server, secret, &error) == GT_OK);
    const struct { uint64_t value_length; int opcode; uint32_t expiry; int status; } cases[] = {
        { sizeof(data), GT_OPC_WRITE, expiry, GT_OK },                /* the extent its WRITE token grants */
        { 0, GT_OPC_WRITE, expiry, GT_OK },                           /* an empty value commits one byte */
        { sizeof(data) + 1, GT_OPC_WRITE, expiry, GT_ACCESS_DENIED }, /* a value longer than the grant */
        { sizeof(data), GT_OPC_WRITE, 1000, GT_TOKEN_EXPIRED },       /* a token that expired long ago */
        { sizeof(data), GT_OPC_READ, expiry, GT_ACCESS_DENIED },      /* a READ token grants no COMMIT */
    };
    for (uint32_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    {
        gt_put_u64(record + 8, cases[i].value_length);
        gt_op write = token_write(10 + i, peer, region, sizeof(data), 65536, &key, cases[i].opcode, cases[i].expiry);
        write.commit = record;
        write.commit_length = sizeof(record);
        CHECK(gt_engine_submit(engine, &write, 1, &error) == 1);
        CHECK(await(engine, done, 1, 5000) == 1);
        CHECK(node.commits == 2 + (int)i && node.last_token_status == cases[i].status);
    }
    /* the connection remembers the tokens that verified: one bit off, right after one, is still refused */
    gt_op good = token_write(30, peer, region, sizeof(data), 65536, &key, GT_OPC_WRITE, expiry);
    gt_op forged = good;
    forged.user_data = 31;
    forged.token[GT_TOKEN_LENGTH - 1] ^= 1;
    gt_op pair[2] = { good, forged };
    CHECK(gt_engine_submit(engine, pair, 2, &error) == 2);
    CHECK(await(engine, done, 2, 5000) == 2);
    CHECK(status_of(done, 2, 30) == GT_OK && status_of(done, 2, 31) == GT_ACCESS_DENIED);
    gt_engine_destroy(engine);
    node_stop(&node);
}

/*
 * A one-frame WRITE with its record known at submit goes as one WRITE_COMMIT: one request at the server, the record
 * checked (its token as the WRITE token of the committed extent) once the bytes are in; a refused WRITE part is
 * answered alone, with no COMMIT upcall; a late record, and a sliced value, still go as COMMIT frames of their own.
 */
static void write_commit_carries_its_record_in_one_frame(void)
{
    test_node node;
    CHECK(node_start(&node));
    uint8_t secret[32];
    memset(secret, 0x31, sizeof(secret));
    gt_error error;
    gt_hmac_key key;
    gt_hmac_key_init(&key, secret, 32);
    CHECK(gt_server_set_token_key(node.server, secret, &error) == GT_OK);
    uint32_t peer;
    gt_engine *engine = connected_client(&node, 8192, 5000, &peer);
    CHECK(engine != NULL);
    uint8_t data[5000];
    fill_pattern(data, sizeof(data), 17);
    uint32_t region;
    CHECK(gt_engine_register_memory(engine, data, sizeof(data), &region, &error) == GT_OK);
    const uint32_t expiry = (uint32_t)(gt_epoch_ms() / 1000 + 600);
    uint8_t record[40] = { 0 };
    record[0] = 1;
    gt_put_u64(record + 8, sizeof(data));
    gt_completion done[2];
    gt_server_stats before;
    gt_server_stats after;

    gt_server_get_stats(node.server, &before);
    gt_op write = token_write(1, peer, region, sizeof(data), 65536, &key, GT_OPC_WRITE, expiry);
    write.commit = record;
    write.commit_length = sizeof(record);
    CHECK(gt_engine_submit(engine, &write, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    gt_server_get_stats(node.server, &after);
    CHECK(after.requests - before.requests == 1);
    CHECK(node.commits == 1 && node.last_commit_length == sizeof(record) && node.last_failed_status == 0 &&
        node.last_token_status == GT_OK && memcmp(node.last_commit, record, sizeof(record)) == 0);
    CHECK(memcmp(node.segment + 65536, data, sizeof(data)) == 0);

    /* a READ token: the WRITE part is refused, one answer, no upcall, no byte moved */
    memset(node.segment + 131072, 0, sizeof(data));
    gt_op refused = token_write(2, peer, region, sizeof(data), 131072, &key, GT_OPC_READ, expiry);
    refused.commit = record;
    refused.commit_length = sizeof(record);
    CHECK(gt_engine_submit(engine, &refused, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_ACCESS_DENIED);
    CHECK(node.commits == 1 && node.segment[131072] == 0);

    /* a record naming a value longer than the WRITE token grants: the COMMIT part is refused by its token */
    gt_put_u64(record + 8, sizeof(data) + 1);
    gt_op longer = token_write(3, peer, region, sizeof(data), 196608, &key, GT_OPC_WRITE, expiry);
    longer.commit = record;
    longer.commit_length = sizeof(record);
    CHECK(gt_engine_submit(engine, &longer, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1);
    CHECK(node.commits == 2 && node.last_token_status == GT_ACCESS_DENIED);
    gt_put_u64(record + 8, sizeof(data));

    /* a record that comes later: WRITE, then COMMIT */
    gt_server_get_stats(node.server, &before);
    gt_op later = token_write(4, peer, region, sizeof(data), 262144, &key, GT_OPC_WRITE, expiry);
    later.flags = GT_OP_FLAG_COMMIT_LATER;
    CHECK(gt_engine_submit(engine, &later, 1, &error) == 1);
    CHECK(gt_engine_provide_commit(engine, 4, record, sizeof(record), &error) == GT_OK);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    gt_server_get_stats(node.server, &after);
    CHECK(after.requests - before.requests == 2 && node.commits == 3 && node.last_token_status == GT_OK);
    gt_engine_destroy(engine);

    /* a value sliced in two (slices of 4 KiB): two WRITEs and a COMMIT */
    engine = connected_client(&node, 4096, 5000, &peer);
    CHECK(engine != NULL);
    CHECK(gt_engine_register_memory(engine, data, sizeof(data), &region, &error) == GT_OK);
    gt_server_get_stats(node.server, &before);
    gt_op sliced = token_write(5, peer, region, sizeof(data), 327680, &key, GT_OPC_WRITE, expiry);
    sliced.commit = record;
    sliced.commit_length = sizeof(record);
    CHECK(gt_engine_submit(engine, &sliced, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    gt_server_get_stats(node.server, &after);
    CHECK(after.requests - before.requests == 3 && node.commits == 4 && node.last_token_status == GT_OK);
    CHECK(memcmp(node.segment + 327680, data, sizeof(data)) == 0);
    gt_engine_destroy(engine);
    node_stop(&node);
}

static int raw_connect(const uint16_t port)
{
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address;
    memset(&address, 0, sizeof(address));
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval timeout = { .tv_sec = 5, .tv_usec = 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    if (connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0)
    {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads until the peer closes (returns 1) or the receive timeout passes (0). */
static int closed_by_peer(const int fd)
{
    uint8_t sink[4096];
    for (;;)
    {
        const ssize_t n = recv(fd, sink, sizeof(sink), 0);
        if (n == 0)
        {
            return 1;
        }
        if (n < 0)
        {
            return errno == ECONNRESET;
        }
    }
}

/* Sends a LOCAL_CONNECT header (length and status as given) and reads the answer's header and record. */
static int local_connect_raw(const int fd, const uint64_t request_id, const uint32_t segment_id, const uint32_t length,
    const int32_t status, gt_header *answer, uint8_t record[GT_LOCAL_INFO_LENGTH])
{
    gt_header h;
    memset(&h, 0, sizeof(h));
    h.opcode = GT_OPC_LOCAL_CONNECT;
    h.request_id = request_id;
    h.segment_id = segment_id;
    h.length = length;
    h.status = status;
    uint8_t frame[GT_HEADER_LENGTH];
    gt_header_encode(frame, &h);
    uint8_t header[GT_HEADER_LENGTH];
    if (send(fd, frame, sizeof(frame), 0) != sizeof(frame) || recv(fd, header, sizeof(header), MSG_WAITALL) !=
        sizeof(header) || gt_header_decode(header, 1u << 20, answer) != GT_DECODE_OK)
    {
        return 0;
    }
    return answer->length == 0 ||
        (answer->length == GT_LOCAL_INFO_LENGTH && recv(fd, record, GT_LOCAL_INFO_LENGTH, MSG_WAITALL) ==
        GT_LOCAL_INFO_LENGTH);
}

/*
 * LOCAL_CONNECT on the server: refused while the node has it off, checked (length, status, segment), answered with a
 * record naming this process, the segment's memory and a cookie that reads back; the record's decoder refuses garbage,
 * and a record whose cookie is not the node's does not verify.
 */
static void local_connect_is_checked_and_answered(void)
{
    test_node node;
    CHECK(node_start(&node)); /* local transfers off */
    int fd = raw_connect(gt_server_port(node.server));
    CHECK(fd >= 0);
    gt_header answer;
    uint8_t record[GT_LOCAL_INFO_LENGTH];
    CHECK(local_connect_raw(fd, 1, SEGMENT_ID, 0, 0, &answer, record));
    CHECK(answer.opcode == (GT_OPC_LOCAL_CONNECT | GT_OPC_RESPONSE_BIT) && answer.request_id == 1 &&
        answer.status == GT_UNAVAILABLE && answer.length == 0);
    close(fd);
    node_stop(&node);

    node_local_transfers = 1;
    CHECK(node_start(&node));
    node_local_transfers = 0;
    fd = raw_connect(gt_server_port(node.server));
    CHECK(fd >= 0);
    CHECK(local_connect_raw(fd, 2, SEGMENT_ID, 8, 0, &answer, record) && answer.status == GT_INVALID_PARAMS);
    CHECK(local_connect_raw(fd, 3, SEGMENT_ID, 0, -1, &answer, record) && answer.status == GT_INVALID_PARAMS);
    CHECK(local_connect_raw(fd, 4, SEGMENT_ID + 1, 0, 0, &answer, record) && answer.status == GT_SEGMENT_NOT_FOUND);
    CHECK(local_connect_raw(fd, 5, SEGMENT_ID, 0, 0, &answer, record));
    CHECK(answer.status == GT_OK && answer.length == GT_LOCAL_INFO_LENGTH && answer.segment_id == SEGMENT_ID &&
        answer.request_id == 5);
    gt_local_info info;
    CHECK(gt_local_info_decode(record, &info) == GT_OK);
    CHECK(info.pid == (uint32_t)getpid() && info.segment_address == (uint64_t)(uintptr_t)node.segment &&
        info.segment_length == SEGMENT_BYTES);
    gt_error error;
    CHECK(gt_local_verify(&info, &error) == GT_OK);
    gt_local_info forged = info;
    forged.cookie ^= 1;
    CHECK(gt_local_verify(&forged, &error) == GT_UNAVAILABLE);
    forged = info;
    forged.generation++;
    CHECK(gt_local_verify(&forged, &error) == GT_UNAVAILABLE);
    /* the connection stays usable after refusals */
    CHECK(local_connect_raw(fd, 6, SEGMENT_ID, 0, 0, &answer, record) && answer.status == GT_OK);
    close(fd);

    /* the decoder: each field that must hold, broken in turn */
    uint8_t bad[GT_LOCAL_INFO_LENGTH];
    const int offsets[] = { 0, 4, 5, 8, 12, 24, 40, 48, 56 };
    for (size_t k = 0; k < sizeof(offsets) / sizeof(offsets[0]); k++)
    {
        memcpy(bad, record, sizeof(bad));
        if (offsets[k] == 8 || offsets[k] == 24 || offsets[k] == 40 || offsets[k] == 48 || offsets[k] == 56)
        {
            memset(bad + offsets[k], 0, offsets[k] == 8 ? 4 : 8); /* zero pid, address or length */
        }
        else
        {
            bad[offsets[k]] ^= 0x40;
        }
        CHECK(gt_local_info_decode(bad, &info) == GT_INVALID_PARAMS);
    }
    memcpy(bad, record, sizeof(bad));
    gt_put_u64(bad + 48, UINT64_MAX - 10); /* a range that wraps */
    CHECK(gt_local_info_decode(bad, &info) == GT_INVALID_PARAMS);
    node_stop(&node);
}

static uint64_t local_count(gt_engine *engine, const int which)
{
    uint64_t counts[3];
    gt_engine_local_counters(engine, &counts[0], &counts[1], &counts[2]);
    return counts[which];
}

/*
 * A node that answers LOCAL_CONNECT and checks tokens signed with a secret of fill bytes (*key), and a client engine
 * with local transfers on connected to it (*peer); NULL when either failed.
 */
static gt_engine *same_host_pair(test_node *node, const uint8_t fill, gt_hmac_key *key, uint32_t *peer)
{
    node_local_transfers = 1;
    const int started = node_start(node);
    node_local_transfers = 0;
    if (!started)
    {
        return NULL;
    }
    uint8_t secret[32];
    memset(secret, fill, sizeof(secret));
    gt_error error;
    gt_hmac_key_init(key, secret, 32);
    if (gt_server_set_token_key(node->server, secret, &error) != GT_OK)
    {
        return NULL;
    }
    client_local_transfers = 1;
    gt_engine *engine = connected_client(node, 512u << 10, 5000, peer);
    client_local_transfers = 0;
    return engine;
}

/*
 * Transfers to a node on this host that answers LOCAL_CONNECT: a 1 MiB WRITE (sliced over TCP it would be two
 * frames) lands by process_vm_writev with its COMMIT the one frame the node reads; the READ of it comes back with
 * its CRC32C and no frame; small transfers, expired tokens and ranges outside the grant keep to TCP (the node's
 * refusals); a change of the node's segment table sends the next transfer over TCP and the one after asks again.
 */
static void same_host_transfers_skip_the_socket(void)
{
    test_node node;
    gt_hmac_key key;
    uint32_t peer;
    gt_engine *engine = same_host_pair(&node, 0x52, &key, &peer);
    CHECK(engine != NULL);
    gt_error error;
    const uint32_t length = 1u << 20;
    uint8_t *out = malloc(length);
    uint8_t *in = malloc(length);
    CHECK(out != NULL && in != NULL);
    fill_pattern(out, length, 23);
    memset(in, 0, length);
    uint32_t out_region;
    uint32_t in_region;
    CHECK(register_both(engine, out, in, length, &out_region, &in_region));
    const uint32_t expiry = (uint32_t)(gt_epoch_ms() / 1000 + 600);
    uint8_t record[40] = { 0 };
    record[0] = 1;
    gt_put_u64(record + 8, length);
    gt_completion done[4];
    gt_server_stats before;
    gt_server_stats after;

    gt_server_get_stats(node.server, &before);
    gt_op write = token_write(1, peer, out_region, length, 1u << 20, &key, GT_OPC_WRITE, expiry);
    write.commit = record;
    write.commit_length = sizeof(record);
    CHECK(gt_engine_submit(engine, &write, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    gt_server_get_stats(node.server, &after);
    CHECK(memcmp(node.segment + (1u << 20), out, length) == 0);
    CHECK(local_count(engine, 1) == 1 && local_count(engine, 2) == 0);
    /* the LOCAL_CONNECT and the COMMIT: no WRITE frame, not a byte of the value through the socket */
    CHECK(after.requests - before.requests == 2 && after.bytes_in - before.bytes_in < 4096);
    CHECK(node.commits == 1 && node.last_token_status == GT_OK && node.writes == 0);

    gt_op read = op_of(2, peer, GT_OP_READ, in_region, 0, length, 1u << 20);
    read.flags = GT_OP_FLAG_CRC32C;
    read.has_token = 1;
    sign_token(&key, GT_OPC_READ, SEGMENT_ID, 1u << 20, length, expiry, read.token);
    gt_server_get_stats(node.server, &before);
    CHECK(gt_engine_submit(engine, &read, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    gt_server_get_stats(node.server, &after);
    CHECK(memcmp(in, out, length) == 0 && after.requests == before.requests);
    int has = 0;
    CHECK(crc_of(done, 1, 2, &has) == crc32c_of(out, length) && has == 1);
    CHECK(local_count(engine, 0) == 1);

    /* an expired token and a range beyond the grant go over TCP, where the node refuses them */
    gt_op expired = token_write(3, peer, out_region, length, 3u << 20, &key, GT_OPC_WRITE,
        (uint32_t)(gt_epoch_ms() / 1000 - 5));
    CHECK(gt_engine_submit(engine, &expired, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_TOKEN_EXPIRED);
    gt_op beyond = token_write(4, peer, out_region, length, 4u << 20, &key, GT_OPC_WRITE, expiry);
    beyond.grant_length = length - 4096; /* the grant holds less than the range (and the token was signed for more) */
    CHECK(gt_engine_submit(engine, &beyond, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status != GT_OK);
    CHECK(node.segment[3u << 20] == 0 && node.segment[4u << 20] == 0);
    CHECK(local_count(engine, 1) == 1);

    /* a small value keeps to TCP (WRITE_COMMIT) */
    gt_op small = token_write(5, peer, out_region, 4096, 5u << 20, &key, GT_OPC_WRITE, expiry);
    small.commit = record;
    small.commit_length = sizeof(record);
    gt_put_u64(record + 8, 4096);
    CHECK(gt_engine_submit(engine, &small, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    CHECK(local_count(engine, 1) == 1 && node.writes == 1 && memcmp(node.segment + (5u << 20), out, 4096) == 0);
    gt_put_u64(record + 8, length);

    /* the node's table changes (same id, same memory): one transfer over TCP, then a new exchange, local again */
    const uint32_t id = SEGMENT_ID;
    const uint64_t address = (uint64_t)(uintptr_t)node.segment;
    const uint64_t size = SEGMENT_BYTES;
    CHECK(gt_server_set_segments(node.server, &id, &address, &size, 1, &error) == GT_OK);
    for (uint64_t k = 6; k <= 7; k++)
    {
        fill_pattern(out, length, (uint32_t)k);
        gt_op again = token_write(k, peer, out_region, length, 6u << 20, &key, GT_OPC_WRITE, expiry);
        again.commit = record;
        again.commit_length = sizeof(record);
        CHECK(gt_engine_submit(engine, &again, 1, &error) == 1);
        CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
        CHECK(memcmp(node.segment + (6u << 20), out, length) == 0);
    }
    CHECK(local_count(engine, 2) == 1 && local_count(engine, 1) == 2 && node.writes == 3); /* 2 TCP slices */
    gt_engine_destroy(engine);

    /* with local transfers off in the engine, every byte goes over TCP */
    gt_engine_config config;
    gt_engine_config_defaults(&config);
    CHECK(config.local_transfers == 1 && config.local_min_bytes == (64u << 10));
    config.local_transfers = 0;
    CHECK(gt_engine_create(&config, &engine, &error) == GT_OK);
    CHECK(gt_engine_connect(engine, "127.0.0.1", gt_server_port(node.server), &peer, &error) == GT_OK);
    CHECK(register_both(engine, out, in, length, &out_region, &in_region));
    read.peer = peer;
    read.region = in_region;
    memset(in, 0, length);
    gt_server_get_stats(node.server, &before);
    CHECK(gt_engine_submit(engine, &read, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    CHECK(await_bytes_out(node.server, before.bytes_out + length, 5000) - before.bytes_out >= length &&
        local_count(engine, 0) == 0);
    gt_engine_destroy(engine);
    node_stop(&node);

    /* a node that refuses LOCAL_CONNECT: TCP, counted as a fallback */
    CHECK(node_start(&node));
    client_local_transfers = 1;
    engine = connected_client(&node, 512u << 10, 5000, &peer);
    client_local_transfers = 0;
    CHECK(engine != NULL && register_both(engine, out, in, length, &out_region, &in_region));
    gt_op plain = op_of(8, peer, GT_OP_WRITE, out_region, 0, length, 0);
    CHECK(gt_engine_submit(engine, &plain, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    CHECK(memcmp(node.segment, out, length) == 0 && local_count(engine, 1) == 0 && local_count(engine, 2) == 1);
    gt_engine_destroy(engine);
    node_stop(&node);
    free(out);
    free(in);
}

/* n 4 KiB transfers of one call, i-th at remote base + at[i] pages and local page i, under one shared grant token. */
static void page_ops(gt_op *ops, const int n, const uint64_t first_id, const uint32_t peer, const uint8_t opcode,
    const uint32_t region, const uint64_t base, const uint32_t *at, const uint8_t *token, const uint32_t grant)
{
    for (int i = 0; i < n; i++)
    {
        ops[i] = op_of(first_id + (uint64_t)i, peer, opcode, region, (uint64_t)i * 4096, 4096,
            base + (uint64_t)at[i] * 4096);
        ops[i].has_token = 1;
        ops[i].grant_offset = base;
        ops[i].grant_length = grant;
        memcpy(ops[i].token, token, GT_TOKEN_LENGTH);
    }
}

/* Every one of count completions has status GT_OK. */
static int all_ok(const gt_completion *done, const int count)
{
    for (int i = 0; i < count; i++)
    {
        if (done[i].status != GT_OK)
        {
            return 0;
        }
    }
    return 1;
}

/*
 * The small READs of one call to one segment of a node on this host move together: 32 READs of 4 KiB pages in
 * reverse order under one shared grant come back with their CRC32Cs and no frame at all, and so does a lone one; a
 * READ whose token expired goes over TCP alone (the node refuses it) while the rest of its call moves locally; after
 * a change of the node's table one call takes TCP and the next moves locally again. WRITEs below local_min_bytes keep
 * to TCP however many a call holds (WRITE_COMMIT frames).
 */
static void small_reads_of_one_call_move_together(void)
{
    enum { N = 32, PAGE = 4096 };
    test_node node;
    gt_hmac_key key;
    uint32_t peer;
    gt_engine *engine = same_host_pair(&node, 0x53, &key, &peer);
    CHECK(engine != NULL);
    gt_error error;
    const uint32_t length = N * PAGE;
    uint8_t *out = malloc(length);
    uint8_t *in = malloc(length);
    CHECK(out != NULL && in != NULL);
    fill_pattern(out, length, 31);
    memset(in, 0, length);
    uint32_t out_region;
    uint32_t in_region;
    CHECK(register_both(engine, out, in, length, &out_region, &in_region));
    const uint32_t expiry = (uint32_t)(gt_epoch_ms() / 1000 + 600);
    const uint64_t base = 2u << 20;
    uint32_t ascending[N];
    uint32_t descending[N];
    for (int i = 0; i < N; i++)
    {
        ascending[i] = (uint32_t)i;
        descending[i] = (uint32_t)(N - 1 - i);
    }
    uint8_t write_token[GT_TOKEN_LENGTH];
    uint8_t read_token[GT_TOKEN_LENGTH];
    sign_token(&key, GT_OPC_WRITE, SEGMENT_ID, base, length, expiry, write_token);
    sign_token(&key, GT_OPC_READ, SEGMENT_ID, base, length, expiry, read_token);
    uint8_t records[N][40];
    gt_op ops[N + 1];
    gt_completion done[N + 1];

    /* 32 WRITEs with their records: 32 WRITE_COMMIT frames, no LOCAL_CONNECT */
    page_ops(ops, N, 1, peer, GT_OP_WRITE, out_region, base, ascending, write_token, length);
    for (int i = 0; i < N; i++)
    {
        memset(records[i], 0, sizeof(records[i]));
        records[i][0] = 1;
        gt_put_u64(records[i] + 8, PAGE);
        ops[i].commit = records[i];
        ops[i].commit_length = sizeof(records[i]);
    }
    gt_server_stats before;
    gt_server_stats after;
    gt_server_get_stats(node.server, &before);
    CHECK(gt_engine_submit(engine, ops, N, &error) == N);
    CHECK(await(engine, done, N, 5000) == N && all_ok(done, N));
    gt_server_get_stats(node.server, &after);
    CHECK(memcmp(node.segment + base, out, length) == 0);
    CHECK(local_count(engine, 1) == 0 && local_count(engine, 2) == 0);
    CHECK(node.writes == N && node.commits == N && node.last_token_status == GT_OK);
    CHECK(after.requests - before.requests == N && after.bytes_in - before.bytes_in > length);

    /* 32 READs, the pages in reverse order, each with its CRC32C: the LOCAL_CONNECT, then no frame */
    page_ops(ops, N, 100, peer, GT_OP_READ, in_region, base, descending, read_token, length);
    for (int i = 0; i < N; i++)
    {
        ops[i].flags = GT_OP_FLAG_CRC32C;
    }
    gt_server_get_stats(node.server, &before);
    CHECK(gt_engine_submit(engine, ops, N, &error) == N);
    CHECK(await(engine, done, N, 5000) == N && all_ok(done, N));
    gt_server_get_stats(node.server, &after);
    CHECK(after.requests - before.requests == 1 && local_count(engine, 0) == N);
    for (int i = 0; i < N; i++)
    {
        const uint8_t *page = out + (size_t)descending[i] * PAGE;
        int has = 0;
        CHECK(memcmp(in + (size_t)i * PAGE, page, PAGE) == 0);
        CHECK(crc_of(done, N, 100 + (uint64_t)i, &has) == crc32c_of(page, PAGE) && has == 1);
    }

    /* a lone READ of one page, with its CRC32C: no frame either */
    memset(in, 0, length);
    page_ops(ops, 1, 200, peer, GT_OP_READ, in_region, base, &descending[0], read_token, length);
    ops[0].flags = GT_OP_FLAG_CRC32C;
    gt_server_get_stats(node.server, &before);
    CHECK(gt_engine_submit(engine, ops, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && all_ok(done, 1));
    gt_server_get_stats(node.server, &after);
    const uint8_t *last = out + (size_t)(N - 1) * PAGE;
    int has_crc = 0;
    CHECK(after.requests == before.requests && local_count(engine, 0) == N + 1 && memcmp(in, last, PAGE) == 0);
    CHECK(crc_of(done, 1, 200, &has_crc) == crc32c_of(last, PAGE) && has_crc == 1);

    /* 32 READs and one whose token expired: that one over TCP, refused by the node; the 32 locally */
    page_ops(ops, N, 300, peer, GT_OP_READ, in_region, base, ascending, read_token, length);
    ops[N] = op_of(400, peer, GT_OP_READ, in_region, 0, PAGE, base);
    ops[N].has_token = 1;
    sign_token(&key, GT_OPC_READ, SEGMENT_ID, base, PAGE, (uint32_t)(gt_epoch_ms() / 1000 - 5), ops[N].token);
    CHECK(gt_engine_submit(engine, ops, N + 1, &error) == N + 1);
    CHECK(await(engine, done, N + 1, 5000) == N + 1);
    CHECK(status_of(done, N + 1, 400) == GT_TOKEN_EXPIRED && status_of(done, N + 1, 300) == GT_OK &&
        status_of(done, N + 1, 300 + N - 1) == GT_OK && local_count(engine, 0) == 2 * N + 1);

    /* the node's table changes: the next call's READs go over TCP, the one after locally again */
    const uint32_t id = SEGMENT_ID;
    const uint64_t address = (uint64_t)(uintptr_t)node.segment;
    const uint64_t size = SEGMENT_BYTES;
    CHECK(gt_server_set_segments(node.server, &id, &address, &size, 1, &error) == GT_OK);
    for (int round = 0; round < 2; round++)
    {
        memset(in, 0, length);
        page_ops(ops, N, 500 + 100 * (uint64_t)round, peer, GT_OP_READ, in_region, base, ascending, read_token,
            length);
        gt_server_get_stats(node.server, &before);
        CHECK(gt_engine_submit(engine, ops, N, &error) == N);
        CHECK(await(engine, done, N, 5000) == N && all_ok(done, N));
        gt_server_get_stats(node.server, &after);
        CHECK(memcmp(in, out, length) == 0);
        /* over TCP: READV frames; then the new LOCAL_CONNECT alone */
        CHECK(round == 0 ? after.requests - before.requests >= 1 && local_count(engine, 2) == N :
            after.requests - before.requests == 1 && local_count(engine, 2) == N);
    }
    CHECK(local_count(engine, 0) == 3 * N + 1 && local_count(engine, 1) == 0);
    gt_engine_destroy(engine);
    node_stop(&node);
    free(out);
    free(in);
}

static void malformed_frames_close_the_connection(void)
{
    test_node node;
    CHECK(node_start(&node));
    const uint16_t port = gt_server_port(node.server);
    gt_header h;
    memset(&h, 0, sizeof(h));
    h.opcode = GT_OPC_READ;
    h.segment_id = SEGMENT_ID;
    h.length = 16;
    uint8_t frame[GT_HEADER_LENGTH];

    int fd = raw_connect(port);
    CHECK(fd >= 0);
    gt_header_encode(frame, &h);
    frame[0] = 'X'; /* bad magic */
    CHECK(send(fd, frame, sizeof(frame), 0) == sizeof(frame));
    CHECK(closed_by_peer(fd));
    close(fd);

    fd = raw_connect(port);
    h.opcode = 0x81; /* a response opcode from a client */
    gt_header_encode(frame, &h);
    CHECK(send(fd, frame, sizeof(frame), 0) == sizeof(frame));
    CHECK(closed_by_peer(fd));
    close(fd);

    fd = raw_connect(port);
    h.opcode = GT_OPC_WRITE;
    h.length = 32u << 20; /* above max frame */
    gt_header_encode(frame, &h);
    CHECK(send(fd, frame, sizeof(frame), 0) == sizeof(frame));
    CHECK(closed_by_peer(fd));
    close(fd);

    /* a truncated WRITE: header and half the payload, then the client goes away */
    fd = raw_connect(port);
    h.length = 1000;
    gt_header_encode(frame, &h);
    uint8_t half[500];
    memset(half, 0x77, sizeof(half));
    CHECK(send(fd, frame, sizeof(frame), 0) == sizeof(frame));
    CHECK(send(fd, half, sizeof(half), 0) == sizeof(half));
    shutdown(fd, SHUT_WR);
    CHECK(closed_by_peer(fd));
    close(fd);

    /* a truncated header */
    fd = raw_connect(port);
    CHECK(send(fd, frame, 20, 0) == 20);
    shutdown(fd, SHUT_WR);
    CHECK(closed_by_peer(fd));
    close(fd);

    /* the server still serves a healthy client: PING, then a READV with one bad entry */
    fd = raw_connect(port);
    h.opcode = GT_OPC_PING;
    h.length = 0;
    h.request_id = 5;
    gt_header_encode(frame, &h);
    CHECK(send(fd, frame, sizeof(frame), 0) == sizeof(frame));
    uint8_t answer[GT_HEADER_LENGTH + 4 * 2 + 16];
    CHECK(recv(fd, answer, GT_HEADER_LENGTH, MSG_WAITALL) == GT_HEADER_LENGTH);
    gt_header got;
    CHECK(gt_header_decode(answer, 1u << 20, &got) == GT_DECODE_OK && got.opcode == 0x83 && got.request_id == 5);
    memset(node.segment, 0x5A, 16);
    uint8_t vector[GT_HEADER_LENGTH * 3];
    gt_header entry;
    memset(&entry, 0, sizeof(entry));
    entry.opcode = GT_OPC_READ;
    entry.segment_id = SEGMENT_ID;
    entry.length = 16;
    gt_header_encode(vector + GT_HEADER_LENGTH, &entry);
    entry.opcode = GT_OPC_WRITE; /* not a READ: fails alone */
    gt_header_encode(vector + 2 * GT_HEADER_LENGTH, &entry);
    h.opcode = GT_OPC_READV;
    h.segment_id = 0;
    h.request_id = 6;
    h.length = 2 * GT_HEADER_LENGTH;
    gt_header_encode(vector, &h);
    CHECK(send(fd, vector, sizeof(vector), 0) == sizeof(vector));
    CHECK(recv(fd, answer, sizeof(answer), MSG_WAITALL) == (ssize_t)sizeof(answer));
    CHECK(gt_header_decode(answer, 1u << 20, &got) == GT_DECODE_OK && got.opcode == 0x90 && got.status == 0);
    CHECK(got.length == 8 + 16 && got.request_id == 6);
    CHECK((int32_t)gt_get_u32(answer + 64) == 0 && (int32_t)gt_get_u32(answer + 68) == GT_INVALID_PARAMS);
    CHECK(answer[72] == 0x5A && answer[87] == 0x5A);
    close(fd);

    gt_server_stats stats;
    gt_server_get_stats(node.server, &stats);
    CHECK(stats.protocol_errors == 3);
    node_stop(&node);
    CHECK(node.closes_with_reason >= 5);
}

/* A client's QP-information record asking for segment_id. */
static void client_qp_record(uint8_t out[GT_QP_INFO_LENGTH], const uint32_t segment_id)
{
    gt_qp_info info;
    memset(&info, 0, sizeof(info));
    info.port = 1;
    info.mtu = 5;
    info.qp_num = 0x1234;
    info.psn = 0x4321;
    info.segment_id = segment_id;
    gt_qp_info_encode(out, &info);
}

/* Sends an RDMA_CONNECT frame with payload and reads the answer (and its record when it carries one); 1 on success. */
static int rdma_connect_raw(const int fd, const uint64_t request_id, const uint32_t segment_id, const int32_t status,
    const uint8_t *payload, const uint32_t length, gt_header *answer, uint8_t record[GT_QP_INFO_LENGTH])
{
    gt_header h;
    memset(&h, 0, sizeof(h));
    h.opcode = GT_OPC_RDMA_CONNECT;
    h.request_id = request_id;
    h.segment_id = segment_id;
    h.status = status;
    h.length = length;
    uint8_t frame[GT_HEADER_LENGTH];
    gt_header_encode(frame, &h);
    if (send(fd, frame, sizeof(frame), MSG_NOSIGNAL) != sizeof(frame) ||
        (length > 0 && send(fd, payload, length, MSG_NOSIGNAL) != (ssize_t)length))
    {
        return 0;
    }
    uint8_t bytes[GT_HEADER_LENGTH];
    if (recv(fd, bytes, sizeof(bytes), MSG_WAITALL) != sizeof(bytes) ||
        gt_header_decode(bytes, 1u << 20, answer) != GT_DECODE_OK ||
        answer->opcode != (GT_OPC_RDMA_CONNECT | GT_OPC_RESPONSE_BIT) || answer->request_id != request_id ||
        answer->segment_id != segment_id || answer->offset != 0)
    {
        return 0;
    }
    if (answer->status == 0)
    {
        return answer->length == GT_QP_INFO_LENGTH &&
            recv(fd, record, GT_QP_INFO_LENGTH, MSG_WAITALL) == GT_QP_INFO_LENGTH;
    }
    return answer->length == 0;
}

/* The node's side of the QP-information exchange on a node without an RDMA device (this machine). */
static void rdma_connect_is_checked_and_refused_without_a_device(void)
{
    gt_error error;
    if (gt_rdma_available(&error))
    {
        printf("     skipped: an RDMA device is present\n");
        return;
    }
    test_node node;
    CHECK(node_start(&node));
    const int fd = raw_connect(gt_server_port(node.server));
    CHECK(fd >= 0);
    uint8_t record[GT_QP_INFO_LENGTH];
    uint8_t answer_record[GT_QP_INFO_LENGTH];
    uint8_t big[GT_QP_INFO_LENGTH * 3];
    gt_header answer;
    client_qp_record(record, SEGMENT_ID);
    memset(big, 0, sizeof(big));
    memcpy(big, record, sizeof(record));

    /* malformed: no payload, short, long (discarded whole), garbage, wrong segment in the record, a status */
    CHECK(rdma_connect_raw(fd, 1, SEGMENT_ID, 0, NULL, 0, &answer, answer_record));
    CHECK(answer.status == GT_INVALID_PARAMS);
    CHECK(rdma_connect_raw(fd, 2, SEGMENT_ID, 0, record, 63, &answer, answer_record));
    CHECK(answer.status == GT_INVALID_PARAMS);
    CHECK(rdma_connect_raw(fd, 3, SEGMENT_ID, 0, big, sizeof(big), &answer, answer_record));
    CHECK(answer.status == GT_INVALID_PARAMS);
    uint8_t bad[GT_QP_INFO_LENGTH];
    memcpy(bad, record, sizeof(bad));
    bad[4] = 2; /* version */
    CHECK(rdma_connect_raw(fd, 4, SEGMENT_ID, 0, bad, sizeof(bad), &answer, answer_record));
    CHECK(answer.status == GT_INVALID_PARAMS);
    memcpy(bad, record, sizeof(bad));
    gt_put_u32(bad + 12, 0); /* QP number 0 */
    CHECK(rdma_connect_raw(fd, 5, SEGMENT_ID, 0, bad, sizeof(bad), &answer, answer_record));
    CHECK(answer.status == GT_INVALID_PARAMS);
    CHECK(rdma_connect_raw(fd, 6, SEGMENT_ID + 1, 0, record, sizeof(record), &answer, answer_record));
    CHECK(answer.status == GT_INVALID_PARAMS);
    CHECK(rdma_connect_raw(fd, 7, SEGMENT_ID, 5, record, sizeof(record), &answer, answer_record));
    CHECK(answer.status == GT_INVALID_PARAMS);

    /* an unknown segment, then the real one on a node without a device */
    uint8_t unknown[GT_QP_INFO_LENGTH];
    client_qp_record(unknown, 77);
    CHECK(rdma_connect_raw(fd, 8, 77, 0, unknown, sizeof(unknown), &answer, answer_record));
    CHECK(answer.status == GT_SEGMENT_NOT_FOUND);
    CHECK(rdma_connect_raw(fd, 9, SEGMENT_ID, 0, record, sizeof(record), &answer, answer_record));
    CHECK(answer.status == GT_UNAVAILABLE);

    /* with data tokens on, no remote key is handed out at all */
    uint8_t key[GT_KEY_LENGTH];
    memset(key, 7, sizeof(key));
    gt_server_set_token_key(node.server, key, &error);
    CHECK(rdma_connect_raw(fd, 10, SEGMENT_ID, 0, record, sizeof(record), &answer, answer_record));
    CHECK(answer.status == GT_ACCESS_DENIED);
    CHECK(rdma_connect_raw(fd, 11, 77, 0, unknown, sizeof(unknown), &answer, answer_record));
    CHECK(answer.status == GT_ACCESS_DENIED);
    gt_server_set_token_key(node.server, NULL, &error);

    /* the connection is still in step: a PING answers */
    gt_header h;
    memset(&h, 0, sizeof(h));
    h.opcode = GT_OPC_PING;
    h.request_id = 12;
    uint8_t frame[GT_HEADER_LENGTH];
    gt_header_encode(frame, &h);
    CHECK(send(fd, frame, sizeof(frame), 0) == sizeof(frame));
    CHECK(recv(fd, frame, sizeof(frame), MSG_WAITALL) == sizeof(frame));
    CHECK(gt_header_decode(frame, 1u << 20, &answer) == GT_DECODE_OK && answer.opcode == 0x83 &&
        answer.request_id == 12);
    close(fd);
    gt_server_stats stats;
    gt_server_get_stats(node.server, &stats);
    CHECK(stats.protocol_errors == 0 && stats.error_responses == 11);
    node_stop(&node);
}

/* One scripted answer to gt_rdma_exchange over a socket pair: the status the client reports for it. */
static int exchange_answered_with(const gt_header *answer, const uint8_t *record, const size_t record_length)
{
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0)
    {
        return 12345;
    }
    uint8_t bytes[GT_HEADER_LENGTH + GT_QP_INFO_LENGTH];
    gt_header_encode(bytes, answer);
    memcpy(bytes + GT_HEADER_LENGTH, record, record_length);
    ssize_t ignored = send(pair[1], bytes, GT_HEADER_LENGTH + record_length, 0);
    (void)ignored;
    shutdown(pair[1], SHUT_WR);
    gt_qp_info local = { .port = 1, .mtu = 5, .qp_num = 0x77, .psn = 3 };
    gt_qp_info remote;
    gt_error error;
    const int status = gt_rdma_exchange(pair[0], 9, SEGMENT_ID, &local, &remote, &error);
    uint8_t request[GT_HEADER_LENGTH + GT_QP_INFO_LENGTH];
    gt_header h;
    gt_qp_info sent;
    /* what the client sent: an RDMA_CONNECT for the segment with its record naming it */
    if (recv(pair[1], request, sizeof(request), MSG_WAITALL) != (ssize_t)sizeof(request) ||
        gt_header_decode(request, 1u << 20, &h) != GT_DECODE_OK || h.opcode != GT_OPC_RDMA_CONNECT ||
        h.request_id != 9 || h.segment_id != SEGMENT_ID || h.length != GT_QP_INFO_LENGTH ||
        gt_qp_info_decode(request + GT_HEADER_LENGTH, &sent) != GT_OK || sent.segment_id != SEGMENT_ID ||
        sent.qp_num != 0x77)
    {
        close(pair[0]);
        close(pair[1]);
        return 12346;
    }
    close(pair[0]);
    close(pair[1]);
    return status;
}

/* The client's half of the exchange checks the node's answer like any response. */
static void rdma_exchange_checks_the_answer(void)
{
    gt_qp_info node_info = { .port = 1, .mtu = 5, .qp_num = 0x55, .psn = 8, .segment_id = SEGMENT_ID, .rkey = 0x99,
        .segment_address = 0x10000, .segment_length = 4096 };
    uint8_t record[GT_QP_INFO_LENGTH];
    gt_qp_info_encode(record, &node_info);
    gt_header a;
    memset(&a, 0, sizeof(a));
    a.opcode = GT_OPC_RDMA_CONNECT | GT_OPC_RESPONSE_BIT;
    a.request_id = 9;
    a.segment_id = SEGMENT_ID;
    a.length = GT_QP_INFO_LENGTH;
    CHECK(exchange_answered_with(&a, record, sizeof(record)) == GT_OK);
    gt_header wrong = a;
    wrong.request_id = 10;
    CHECK(exchange_answered_with(&wrong, record, sizeof(record)) == GT_TRANSFER_FAIL);
    wrong = a;
    wrong.opcode = GT_OPC_READ | GT_OPC_RESPONSE_BIT;
    CHECK(exchange_answered_with(&wrong, record, sizeof(record)) == GT_TRANSFER_FAIL);
    wrong = a;
    wrong.segment_id = SEGMENT_ID + 1;
    CHECK(exchange_answered_with(&wrong, record, sizeof(record)) == GT_TRANSFER_FAIL);
    wrong = a;
    wrong.length = 0; /* OK without the record */
    CHECK(exchange_answered_with(&wrong, record, 0) == GT_TRANSFER_FAIL);
    CHECK(exchange_answered_with(&a, record, 20) == GT_TRANSFER_FAIL); /* cut short */
    wrong = a;
    wrong.status = GT_ACCESS_DENIED;
    wrong.length = 0;
    CHECK(exchange_answered_with(&wrong, record, 0) == GT_ACCESS_DENIED);
    wrong.status = -12345; /* unknown status */
    CHECK(exchange_answered_with(&wrong, record, 0) == GT_TRANSFER_FAIL);
    wrong.status = GT_ACCESS_DENIED;
    wrong.length = GT_QP_INFO_LENGTH; /* a refusal with a payload */
    CHECK(exchange_answered_with(&wrong, record, sizeof(record)) == GT_TRANSFER_FAIL);
    uint8_t bad[GT_QP_INFO_LENGTH];
    memcpy(bad, record, sizeof(bad));
    bad[60] = 1;
    CHECK(exchange_answered_with(&a, bad, sizeof(bad)) == GT_TRANSFER_FAIL);
    node_info.segment_id = SEGMENT_ID + 1; /* the record names another segment */
    gt_qp_info_encode(bad, &node_info);
    CHECK(exchange_answered_with(&a, bad, sizeof(bad)) == GT_TRANSFER_FAIL);
    node_info.segment_id = SEGMENT_ID;
    node_info.segment_length = 0;
    gt_qp_info_encode(bad, &node_info);
    CHECK(exchange_answered_with(&a, bad, sizeof(bad)) == GT_TRANSFER_FAIL);
    CHECK(exchange_answered_with(&a, record, 0) == GT_TRANSFER_FAIL); /* no record at all */
}

#ifdef GT_HAVE_VERBS
/* Polls link until want completions arrived (the fake completes at post time; a device would take a while). */
static int rdma_await(gt_rdma_link *link, uint64_t *wr_ids, int32_t *statuses, const int want)
{
    int have = 0;
    const uint64_t until = gt_now_ms() + 5000;
    while (have < want && gt_now_ms() < until)
    {
        const int n = gt_rdma_poll(link, wr_ids + have, statuses + have, want - have);
        if (n < 0)
        {
            return have;
        }
        have += n;
    }
    return have;
}

/* Plans and posts ops on link and waits for every signalled WR; the status of each op (its last WR's) in statuses. */
static int rdma_run(gt_rdma_link *link, const gt_rdma_op *ops, const uint32_t count, int32_t *statuses)
{
    gt_rdma_wr wrs[128];
    gt_error error;
    const int n = gt_rdma_plan(ops, count, 64u << 10, 4, wrs, 128);
    if (n <= 0 || gt_rdma_post(link, wrs, (uint32_t)n, &error) != GT_OK)
    {
        return 0;
    }
    int signalled = 0;
    for (int i = 0; i < n; i++)
    {
        signalled += wrs[i].signaled;
    }
    uint64_t ids[128];
    int32_t got[128];
    if (rdma_await(link, ids, got, signalled) != signalled)
    {
        return 0;
    }
    for (uint32_t op = 0; op < count; op++)
    {
        statuses[op] = 12345;
    }
    for (int i = 0; i < signalled; i++)
    {
        const uint32_t op = (uint32_t)(ids[i] >> 32);
        if (op >= count)
        {
            return 0;
        }
        if (statuses[op] == 12345 || statuses[op] == GT_OK)
        {
            statuses[op] = got[i]; /* an op fails with its first failed WR */
        }
    }
    return 1;
}

static gt_rdma_op rdma_op(const uint8_t opcode, const uint8_t *local, const uint32_t lkey, const gt_qp_info *remote,
    const uint64_t remote_offset, const uint64_t length)
{
    gt_rdma_op op = { .opcode = opcode, .local_address = (uint64_t)(uintptr_t)local, .lkey = lkey,
        .remote_address = remote->segment_address + remote_offset, .rkey = remote->rkey, .length = length };
    return op;
}

/*
 * The RDMA transport end to end on the fake device: a native server with an "RDMA device" answers the exchange over
 * real TCP, the client brings its QP up with the answer and moves bytes one-sided in both directions (every byte
 * checked), and the failures come back as completions: a bad remote key, a range beyond the segment, work flushed
 * after an error, a segment the node dropped. Tokens on, an unknown segment and a node without a device refuse the
 * exchange. Every verbs object is gone afterwards.
 */
static void rdma_moves_every_byte_over_fake_verbs(void)
{
    gt_error error;
    CHECK(fake_verbs_install(0));
    test_node node;
    CHECK(node_start(&node));
    const int fd = raw_connect(gt_server_port(node.server));
    CHECK(fd >= 0);
    gt_qp_info local = { .port = 1, .mtu = IBV_MTU_4096, .qp_num = 0x99, .psn = 1 };
    gt_qp_info remote;
    CHECK(gt_rdma_exchange(fd, 1, SEGMENT_ID, &local, &remote, &error) == GT_UNAVAILABLE); /* no device */
    fake_verbs_install(1);
    CHECK(gt_rdma_available(&error) == 1);

    gt_rdma_device *device = NULL;
    CHECK(gt_rdma_device_open(&device, &error) == GT_OK);
    const size_t local_bytes = 2u << 20;
    uint8_t *memory = aligned_alloc(4096, local_bytes);
    CHECK(memory != NULL);
    fill_pattern(memory, local_bytes, 9);
    fill_pattern(node.segment, SEGMENT_BYTES, 3);
    uint32_t lkey = 0;
    uint32_t unused_rkey = 0;
    void *registration = gt_rdma_register(device, memory, local_bytes, &lkey, &unused_rkey, &error);
    CHECK(registration != NULL);
    gt_rdma_link *link = NULL;
    CHECK(gt_rdma_link_open(device, 16, &link, &local, &error) == GT_OK);
    CHECK(fake_verbs_qp_state(local.qp_num) == IBV_QPS_INIT && local.mtu == IBV_MTU_4096 && local.lid == 7);
    gt_rdma_op early = { .opcode = GT_OP_WRITE, .local_address = (uint64_t)(uintptr_t)memory, .lkey = lkey,
        .remote_address = 1, .rkey = 1, .length = 8 };
    gt_rdma_wr early_wr;
    CHECK(gt_rdma_plan(&early, 1, 4096, 4, &early_wr, 1) == 1);
    CHECK(gt_rdma_post(link, &early_wr, 1, &error) == GT_TRANSFER_FAIL); /* INIT: not ready to send */

    /* the exchange over the TCP connection, then INIT -> RTR -> RTS */
    CHECK(gt_rdma_exchange(fd, 2, SEGMENT_ID, &local, &remote, &error) == GT_OK);
    CHECK(remote.segment_id == SEGMENT_ID && remote.segment_address == (uint64_t)(uintptr_t)node.segment);
    CHECK(remote.segment_length == SEGMENT_BYTES && remote.rkey != 0 && remote.qp_num != local.qp_num);
    CHECK(memcmp(remote.gid, local.gid, 16) == 0 && remote.port == 1);
    CHECK(fake_verbs_qp_state(remote.qp_num) == IBV_QPS_RTS);
    CHECK(gt_rdma_link_connect(link, &remote, &error) == GT_OK);
    CHECK(fake_verbs_qp_state(local.qp_num) == IBV_QPS_RTS);
    CHECK(gt_rdma_link_connect(link, &remote, &error) == GT_TRANSFER_FAIL); /* RTS -> RTR is no transition */

    /* a batch in both directions, sliced into 64 KiB WRs and chains of 4 */
    uint8_t *expected = malloc(SEGMENT_BYTES);
    CHECK(expected != NULL);
    memcpy(expected, node.segment, SEGMENT_BYTES);
    gt_rdma_op ops[4] = {
        rdma_op(GT_OP_WRITE, memory, lkey, &remote, 4096, 300000),
        rdma_op(GT_OP_READ, memory + (1u << 20), lkey, &remote, 1u << 20, 200000),
        rdma_op(GT_OP_READ, memory + (1536u << 10), lkey, &remote, SEGMENT_BYTES - 5000, 5000),
        rdma_op(GT_OP_WRITE, memory + 777, lkey, &remote, SEGMENT_BYTES - 1, 1),
    };
    int32_t statuses[4];
    CHECK(rdma_run(link, ops, 4, statuses));
    CHECK(statuses[0] == GT_OK && statuses[1] == GT_OK && statuses[2] == GT_OK && statuses[3] == GT_OK);
    /* in order: the READ of the tail saw the last byte before the WRITE after it */
    CHECK(memcmp(memory + (1536u << 10), expected + SEGMENT_BYTES - 5000, 5000) == 0);
    memcpy(expected + 4096, memory, 300000);
    expected[SEGMENT_BYTES - 1] = memory[777];
    CHECK(memcmp(node.segment, expected, SEGMENT_BYTES) == 0);
    CHECK(memcmp(memory + (1u << 20), expected + (1u << 20), 200000) == 0);

    /* a bad remote key: a remote access error, the QP goes to ERROR and later work is flushed, nothing lands */
    gt_rdma_op bad_key = rdma_op(GT_OP_READ, memory, lkey, &remote, 0, 4096);
    bad_key.rkey = remote.rkey + 1000;
    CHECK(rdma_run(link, &bad_key, 1, statuses) && statuses[0] == GT_INVALID_PARAMS);
    CHECK(fake_verbs_qp_state(local.qp_num) == IBV_QPS_ERR);
    gt_rdma_op flushed = rdma_op(GT_OP_WRITE, memory, lkey, &remote, 0, 4096);
    CHECK(rdma_run(link, &flushed, 1, statuses) && statuses[0] == GT_TRANSFER_FAIL);
    CHECK(memcmp(node.segment, expected, SEGMENT_BYTES) == 0);
    gt_rdma_link_close(link);

    /* a second QP on the same connection: a range past the segment's end fails whole, before any byte moves */
    CHECK(gt_rdma_link_open(device, 16, &link, &local, &error) == GT_OK);
    CHECK(gt_rdma_exchange(fd, 3, SEGMENT_ID, &local, &remote, &error) == GT_OK);
    CHECK(gt_rdma_link_connect(link, &remote, &error) == GT_OK);
    gt_rdma_op beyond = rdma_op(GT_OP_WRITE, memory, lkey, &remote, SEGMENT_BYTES - 100, 200);
    CHECK(rdma_run(link, &beyond, 1, statuses) && statuses[0] == GT_INVALID_PARAMS);
    CHECK(memcmp(node.segment, expected, SEGMENT_BYTES) == 0);
    gt_rdma_link_close(link);

    /* a third: works until the node drops the segment, whose registration goes with it */
    CHECK(gt_rdma_link_open(device, 16, &link, &local, &error) == GT_OK);
    CHECK(gt_rdma_exchange(fd, 4, SEGMENT_ID, &local, &remote, &error) == GT_OK);
    CHECK(gt_rdma_link_connect(link, &remote, &error) == GT_OK);
    gt_rdma_op again = rdma_op(GT_OP_READ, memory, lkey, &remote, 8192, 65536 * 3 + 5);
    CHECK(rdma_run(link, &again, 1, statuses) && statuses[0] == GT_OK);
    CHECK(memcmp(memory, expected + 8192, 65536 * 3 + 5) == 0);
    CHECK(gt_server_set_segments(node.server, NULL, NULL, NULL, 0, &error) == GT_OK);
    CHECK(rdma_run(link, &again, 1, statuses) && statuses[0] == GT_INVALID_PARAMS);
    gt_rdma_link_close(link);
    const uint32_t id = SEGMENT_ID;
    const uint64_t address = (uint64_t)(uintptr_t)node.segment;
    const uint64_t size = SEGMENT_BYTES;
    CHECK(gt_server_set_segments(node.server, &id, &address, &size, 1, &error) == GT_OK);

    /* refusals: an unknown segment, then data tokens on; the connection stays in step */
    CHECK(gt_rdma_link_open(device, 16, &link, &local, &error) == GT_OK);
    CHECK(gt_rdma_exchange(fd, 5, SEGMENT_ID + 1, &local, &remote, &error) == GT_SEGMENT_NOT_FOUND);
    uint8_t key[GT_KEY_LENGTH];
    memset(key, 3, sizeof(key));
    gt_server_set_token_key(node.server, key, &error);
    CHECK(gt_rdma_exchange(fd, 6, SEGMENT_ID, &local, &remote, &error) == GT_ACCESS_DENIED);
    gt_server_set_token_key(node.server, NULL, &error);
    CHECK(gt_rdma_exchange(fd, 7, SEGMENT_ID, &local, &remote, &error) == GT_OK);
    gt_rdma_link_close(link);

    /* one connection brings up at most 16 node QPs (four are up: those of the exchanges above) */
    CHECK(gt_rdma_link_open(device, 16, &link, &local, &error) == GT_OK);
    int accepted = 0;
    int refused = 0;
    for (uint64_t request = 100; request < 120; request++)
    {
        const int status = gt_rdma_exchange(fd, request, SEGMENT_ID, &local, &remote, &error);
        accepted += status == GT_OK;
        refused += status == GT_UNAVAILABLE;
    }
    CHECK(accepted == 16 - 4 && refused == 20 - accepted);
    gt_rdma_link_close(link);

    close(fd);
    gt_rdma_deregister(device, registration);
    gt_rdma_device_close(device);
    node_stop(&node);
    CHECK(fake_verbs_live() == 0); /* the node's QPs, registrations and device went with it */
    fake_verbs_uninstall();
    free(expected);
    free(memory);
}
/* An engine with RDMA reads on, against the node of a test (one lane, 64 KiB slices). */
static gt_engine *rdma_engine(const uint64_t timeout_ms)
{
    gt_engine_config config;
    gt_engine_config_defaults(&config);
    config.local_transfers = client_local_transfers;
    config.slice_bytes = 64u << 10;
    config.lanes_per_peer = 1;
    config.transfer_timeout_ms = timeout_ms;
    config.rdma_reads = 1;
    gt_engine *engine = NULL;
    gt_error error;
    return gt_engine_create(&config, &engine, &error) == GT_OK ? engine : NULL;
}

/* Frames the node served over TCP (RDMA_CONNECTs included); a one-sided READ adds none. */
static uint64_t tcp_requests(const test_node *node)
{
    gt_server_stats stats;
    gt_server_get_stats(node->server, &stats);
    return stats.requests;
}

/*
 * The client engine with rdma_reads on the fake device: READs without a token go one-sided (every byte checked, the
 * node serving no READ frame), one exchange per segment; WRITEs and tokened READs stay on TCP; a range past the
 * segment goes over TCP for the node's answer; a failed completion fails the READ and sends the segment back to TCP,
 * so does a READ that times out on a peer that stopped answering; a node with tokens on refuses the exchange and
 * without a device everything takes TCP. Nothing is left behind in the fake.
 */
static void engine_reads_one_sided_over_fake_verbs(void)
{
    gt_error error;
    CHECK(fake_verbs_install(0));
    test_node node;
    CHECK(node_start(&node));
    fill_pattern(node.segment, SEGMENT_BYTES, 21);
    const size_t local_bytes = 4u << 20;
    uint8_t *memory = aligned_alloc(4096, local_bytes);
    CHECK(memory != NULL);
    gt_completion done[8];

    /* no device: TCP */
    gt_engine *engine = rdma_engine(5000);
    CHECK(engine != NULL);
    uint32_t peer = 0;
    uint32_t region = 0;
    CHECK(gt_engine_connect(engine, "127.0.0.1", gt_server_port(node.server), &peer, &error) == GT_OK);
    CHECK(gt_engine_register_memory(engine, memory, local_bytes, &region, &error) == GT_OK);
    gt_op read = op_of(1, peer, GT_OP_READ, region, 0, 100000, 4096);
    CHECK(gt_engine_submit(engine, &read, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    CHECK(memcmp(memory, node.segment + 4096, 100000) == 0);
    CHECK(tcp_requests(&node) == 2); /* 100000 bytes in two 64 KiB slices, no exchange */
    gt_engine_destroy(engine);

    fake_verbs_install(1);
    engine = rdma_engine(5000);
    CHECK(engine != NULL);
    CHECK(gt_engine_connect(engine, "127.0.0.1", gt_server_port(node.server), &peer, &error) == GT_OK);
    CHECK(gt_engine_register_memory(engine, memory, local_bytes, &region, &error) == GT_OK);
    memset(memory, 0, local_bytes);
    const uint64_t before = tcp_requests(&node);
    gt_op reads[4] = {
        op_of(11, peer, GT_OP_READ, region, 0, 100, 0),
        op_of(12, peer, GT_OP_READ, region, 4096, 300000, 1u << 20),
        op_of(13, peer, GT_OP_READ, region, 1u << 20, 2u << 20, 3u << 20), /* 32 WRs, two chains of 16 */
        op_of(14, peer, GT_OP_READ, region, 3u << 20, 5000, SEGMENT_BYTES - 5000),
    };
    CHECK(gt_engine_submit(engine, reads, 4, &error) == 4);
    CHECK(await(engine, done, 4, 5000) == 4);
    for (int i = 0; i < 4; i++)
    {
        CHECK(status_of(done, 4, 11 + (uint64_t)i) == GT_OK);
        CHECK(memcmp(memory + reads[i].local_offset, node.segment + reads[i].remote_offset, reads[i].length) == 0);
    }
    CHECK(tcp_requests(&node) == before + 1); /* the exchange, and no READ frame */

    /* a WRITE takes TCP (the ledger sees it); a one-sided READ then sees its bytes */
    fill_pattern(memory, 70000, 5);
    gt_op write = op_of(20, peer, GT_OP_WRITE, region, 0, 70000, 12345);
    CHECK(gt_engine_submit(engine, &write, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    CHECK(node.writes == 2 && memcmp(node.segment + 12345, memory, 70000) == 0);
    const uint64_t after_write = tcp_requests(&node);
    gt_op back = op_of(21, peer, GT_OP_READ, region, 1u << 20, 70000, 12345);
    CHECK(gt_engine_submit(engine, &back, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    CHECK(memcmp(memory + (1u << 20), memory, 70000) == 0 && tcp_requests(&node) == after_write);

    /* past the segment's end: over TCP, where the node answers INVALID_PARAMS */
    gt_op beyond = op_of(22, peer, GT_OP_READ, region, 0, 8192, SEGMENT_BYTES - 4096);
    CHECK(gt_engine_submit(engine, &beyond, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_INVALID_PARAMS);
    CHECK(tcp_requests(&node) == after_write + 1);

    /* the node drops the segment: the one-sided READ fails with a remote access error, then the segment takes TCP */
    CHECK(gt_server_set_segments(node.server, NULL, NULL, NULL, 0, &error) == GT_OK);
    gt_op dropped = op_of(23, peer, GT_OP_READ, region, 0, 4096, 0);
    CHECK(gt_engine_submit(engine, &dropped, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_INVALID_PARAMS);
    const uint32_t id = SEGMENT_ID;
    const uint64_t address = (uint64_t)(uintptr_t)node.segment;
    const uint64_t size = SEGMENT_BYTES;
    CHECK(gt_server_set_segments(node.server, &id, &address, &size, 1, &error) == GT_OK);
    const uint64_t before_tcp = tcp_requests(&node);
    dropped.user_data = 24;
    CHECK(gt_engine_submit(engine, &dropped, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    CHECK(tcp_requests(&node) == before_tcp + 1 && memcmp(memory, node.segment, 4096) == 0);
    CHECK(gt_engine_region_count(engine) == 1);
    gt_engine_destroy(engine);

    /* a peer that stops answering: the READ times out, its QP goes, and the next READ takes TCP */
    engine = rdma_engine(300);
    CHECK(engine != NULL);
    CHECK(gt_engine_connect(engine, "127.0.0.1", gt_server_port(node.server), &peer, &error) == GT_OK);
    CHECK(gt_engine_register_memory(engine, memory, local_bytes, &region, &error) == GT_OK);
    fake_verbs_stall(1);
    read = op_of(25, peer, GT_OP_READ, region, 0, 4096, 0);
    CHECK(gt_engine_submit(engine, &read, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_RPC_TIMEOUT);
    fake_verbs_stall(0);
    const uint64_t before_fallback = tcp_requests(&node);
    read.user_data = 26;
    CHECK(gt_engine_submit(engine, &read, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_OK);
    CHECK(tcp_requests(&node) == before_fallback + 1);
    gt_engine_destroy(engine);

    /* tokens on at the node: the exchange is refused, the READ goes over TCP (and is refused there without one) */
    uint8_t key[GT_KEY_LENGTH];
    memset(key, 9, sizeof(key));
    gt_server_set_token_key(node.server, key, &error);
    engine = rdma_engine(5000);
    CHECK(engine != NULL);
    CHECK(gt_engine_connect(engine, "127.0.0.1", gt_server_port(node.server), &peer, &error) == GT_OK);
    CHECK(gt_engine_register_memory(engine, memory, local_bytes, &region, &error) == GT_OK);
    read = op_of(30, peer, GT_OP_READ, region, 0, 4096, 0);
    CHECK(gt_engine_submit(engine, &read, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_ACCESS_DENIED);
    gt_engine_destroy(engine);

    node_stop(&node);
    CHECK(fake_verbs_live() == 0);
    fake_verbs_uninstall();
    free(memory);
}
#else
static void rdma_moves_every_byte_over_fake_verbs(void)
{
    printf("     skipped: this build has no verbs transport\n");
}

static void engine_reads_one_sided_over_fake_verbs(void)
{
    printf("     skipped: this build has no verbs transport\n");
}
#endif

typedef struct silent_server
{
    int fd;
    uint16_t port;
} silent_server;

/* A listener that accepts through the backlog and never answers. */
static int silent_start(silent_server *s)
{
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address;
    memset(&address, 0, sizeof(address));
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s->fd, (struct sockaddr *)&address, sizeof(address)) != 0 || listen(s->fd, 16) != 0)
    {
        return 0;
    }
    socklen_t length = sizeof(address);
    getsockname(s->fd, (struct sockaddr *)&address, &length);
    s->port = ntohs(address.sin_port);
    return 1;
}

static void timeouts_and_admission_complete_without_answers(void)
{
    silent_server silent;
    CHECK(silent_start(&silent));
    gt_engine_config config;
    gt_engine_config_defaults(&config);
    config.local_transfers = client_local_transfers;
    config.transfer_timeout_ms = 200;
    config.max_queued_frames_per_peer = 2;
    config.max_pending_per_peer = 1;
    config.admission_timeout_ms = 100;
    gt_engine *engine = NULL;
    gt_error error;
    CHECK(gt_engine_create(&config, &engine, &error) == GT_OK);
    uint32_t peer;
    CHECK(gt_engine_connect(engine, "127.0.0.1", silent.port, &peer, &error) == GT_OK);
    uint8_t data[4096];
    uint32_t region;
    CHECK(gt_engine_register_memory(engine, data, sizeof(data), &region, &error) == GT_OK);
    gt_op ops[4];
    for (int i = 0; i < 4; i++)
    {
        ops[i] = op_of((uint64_t)i + 1, peer, GT_OP_READ, region, 0, 1024, 0);
    }
    CHECK(gt_engine_submit(engine, ops, 4, &error) == 4);
    gt_completion done[4];
    CHECK(await(engine, done, 4, 3000) == 4);
    CHECK(status_of(done, 4, 1) == GT_RPC_TIMEOUT && status_of(done, 4, 2) == GT_RPC_TIMEOUT);
    CHECK(status_of(done, 4, 3) == GT_UNAVAILABLE); /* waited for admission, timed out */
    CHECK(status_of(done, 4, 4) == GT_UNAVAILABLE); /* pending queue full: refused at once */
    uint32_t outstanding;
    uint32_t pending;
    CHECK(gt_engine_peer_stats(engine, peer, &outstanding, &pending) == GT_OK && outstanding == 0 && pending == 0);
    uint64_t admitted;
    uint64_t queue_full;
    uint64_t admission_timeout;
    gt_engine_counters(engine, &admitted, &queue_full, &admission_timeout);
    CHECK(admitted == 2 && queue_full == 1 && admission_timeout == 1);
    gt_engine_destroy(engine);
    close(silent.fd);

    /* nobody listening: TRANSFER_FAIL */
    CHECK(gt_engine_create(&config, &engine, &error) == GT_OK);
    CHECK(gt_engine_connect(engine, "127.0.0.1", silent.port, &peer, &error) == GT_OK);
    CHECK(gt_engine_register_memory(engine, data, sizeof(data), &region, &error) == GT_OK);
    CHECK(gt_engine_submit(engine, ops, 1, &error) == 1);
    CHECK(await(engine, done, 1, 3000) == 1 && done[0].status == GT_TRANSFER_FAIL);
    CHECK(gt_engine_connect(engine, "", 1, &peer, &error) == GT_INVALID_PARAMS);
    gt_engine_destroy(engine);
}

static void stale_idle_connection_is_replaced_once(void)
{
    test_node node;
    CHECK(node_start(&node));
    const uint16_t port = gt_server_port(node.server);
    gt_engine *engine = client(1u << 20, 5000);
    uint32_t peer;
    gt_error error;
    CHECK(gt_engine_connect(engine, "127.0.0.1", port, &peer, &error) == GT_OK);
    uint8_t data[4096];
    uint32_t region;
    CHECK(gt_engine_register_memory(engine, data, sizeof(data), &region, &error) == GT_OK);
    gt_completion done[2];
    gt_op reads[2] = { op_of(1, peer, GT_OP_READ, region, 0, 100, 0), op_of(2, peer, GT_OP_READ, region, 0, 100, 0) };
    CHECK(gt_engine_submit(engine, reads, 2, &error) == 2); /* one per lane: both lanes answer once */
    CHECK(await(engine, done, 2, 5000) == 2 && done[0].status == GT_OK && done[1].status == GT_OK);
    /* The node restarts on the same port while the lanes sit idle: nothing polls, so they look healthy. */
    node_stop(&node);
    CHECK(node_start_on(&node, port));
    memset(node.segment, 0x3C, 100);
    reads[0].user_data = 3;
    CHECK(gt_engine_submit(engine, reads, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].user_data == 3 && done[0].status == GT_OK);
    CHECK(data[0] == 0x3C && data[99] == 0x3C);
    /* A node that is gone for good still fails the request (the resend is tried once). */
    node_stop(&node);
    reads[0].user_data = 4;
    CHECK(gt_engine_submit(engine, reads, 1, &error) == 1);
    CHECK(await(engine, done, 1, 5000) == 1 && done[0].status == GT_TRANSFER_FAIL);
    gt_engine_destroy(engine);
}

static gt_engine *engine_with(const uint32_t lanes, const uint32_t max_vector_entries, const uint64_t timeout_ms)
{
    gt_engine_config config;
    gt_engine_config_defaults(&config);
    config.local_transfers = client_local_transfers;
    config.lanes_per_peer = lanes;
    config.max_vector_entries = max_vector_entries;
    config.transfer_timeout_ms = timeout_ms;
    gt_engine *engine = NULL;
    gt_error error;
    if (gt_engine_create(&config, &engine, &error) != GT_OK)
    {
        fprintf(stderr, "engine: %s\n", error.message);
    }
    return engine;
}

/*
 * Batches of small WRITEs with their records against the native server: one WRITEV per lane flush (split by entries,
 * and around a big value that goes alone), every byte in segment memory, every record committed, a refused entry
 * failing alone with nothing moved; with vectors off, one WRITE_COMMIT each.
 */
static void small_writes_leave_as_vectors(void)
{
    test_node node;
    CHECK(node_start(&node));
    uint8_t secret[32];
    memset(secret, 0x52, sizeof(secret));
    gt_error error;
    gt_hmac_key key;
    gt_hmac_key_init(&key, secret, 32);
    CHECK(gt_server_set_token_key(node.server, secret, &error) == GT_OK);
    const uint32_t expiry = (uint32_t)(gt_epoch_ms() / 1000 + 600);
    enum { WRITES = 40, BYTES = 3000, BIG = 300000, BIG_AT = 20 };
    const size_t capacity = (size_t)WRITES * BYTES + BIG;
    uint8_t *data = malloc(capacity);
    CHECK(data != NULL);
    fill_pattern(data, capacity, 23);
    uint8_t records[WRITES + 1][40];
    /* entries per vector, the WRITEVs the node must see */
    static const uint32_t shapes[][2] = {
        { 256, 2 }, /* 20 + 20 around the big value */
        { 16, 4 },  /* 16 + 4, then 16 + 4 */
        { 1, 0 },   /* vectors off */
    };
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
    {
        memset(node.segment, 0, SEGMENT_BYTES);
        gt_engine *engine = engine_with(1, shapes[s][0], 5000);
        CHECK(engine != NULL);
        uint32_t peer;
        uint32_t region;
        CHECK(gt_engine_connect(engine, "127.0.0.1", gt_server_port(node.server), &peer, &error) == GT_OK);
        CHECK(gt_engine_register_memory(engine, data, capacity, &region, &error) == GT_OK);
        gt_op ops[WRITES + 1];
        int n = 0;
        for (int i = 0; i < WRITES; i++)
        {
            if (i == BIG_AT)
            {
                /* a value above 64 KiB goes as a frame of its own, between the vectors */
                ops[n] = token_write(1000, peer, region, BIG, 4u << 20, &key, GT_OPC_WRITE, expiry);
                ops[n].local_offset = (uint64_t)WRITES * BYTES;
                memset(records[WRITES], 0, 40);
                records[WRITES][0] = 1;
                gt_put_u64(records[WRITES] + 8, BIG);
                ops[n].commit = records[WRITES];
                ops[n].commit_length = 40;
                n++;
            }
            /* 8 KiB apart, every other one 4 KiB further: gaps of two widths in the segment */
            const uint64_t at = 65536 + (uint64_t)i * 8192 + (uint64_t)(i % 2) * 4096;
            const int opcode = s == 0 && i == 5 ? GT_OPC_READ : GT_OPC_WRITE; /* a READ token: refused */
            ops[n] = token_write((uint64_t)i + 1, peer, region, BYTES, at, &key, opcode, expiry);
            ops[n].local_offset = (uint64_t)i * BYTES;
            memset(records[i], 0, 40);
            records[i][0] = 1;
            gt_put_u64(records[i] + 8, BYTES);
            gt_put_u64(records[i] + 16, (uint64_t)i + 1);
            ops[n].commit = records[i];
            ops[n].commit_length = 40;
            n++;
        }
        gt_server_stats before;
        gt_server_get_stats(node.server, &before);
        const int commits_before = node.commits;
        CHECK(gt_engine_submit(engine, ops, n, &error) == n);
        gt_completion done[WRITES + 1];
        CHECK(await(engine, done, n, 10000) == n);
        int accepted = 0;
        for (int i = 0; i < n; i++)
        {
            const int32_t status = status_of(done, n, ops[i].user_data);
            if (s == 0 && ops[i].user_data == 6)
            {
                CHECK(status == GT_ACCESS_DENIED);
                CHECK(node.segment[ops[i].remote_offset] == 0 &&
                    node.segment[ops[i].remote_offset + BYTES - 1] == 0); /* nothing moved */
                continue;
            }
            CHECK(status == GT_OK);
            CHECK(memcmp(node.segment + ops[i].remote_offset, data + ops[i].local_offset, ops[i].length) == 0);
            accepted++;
        }
        gt_server_stats after;
        gt_server_get_stats(node.server, &after);
        CHECK(after.write_vectors - before.write_vectors == shapes[s][1]);
        CHECK(after.requests - before.requests == (uint64_t)n);
        CHECK(node.commits - commits_before == accepted);
        gt_engine_destroy(engine);
    }
    CHECK(!node_vector_upcalls || node.vector_upcalls > 0);
    free(data);
    node_stop(&node);
}

static void writev_frames_are_checked(void);

/*
 * The WRITEV tests against a node whose owner takes a vector's entries in one on_writes and one on_commits call: the
 * same outcomes, and the calls were made (2 per vector that had entries to pass on).
 */
static void writev_entries_reach_the_owner_in_one_call_each(void)
{
    node_vector_upcalls = 1;
    small_writes_leave_as_vectors();
    writev_frames_are_checked();
    node_vector_upcalls = 0;
}

/* A WRITEV built by hand: table (headers, then records) and values, with the header's fields as given. */
typedef struct raw_writev
{
    uint32_t count;
    gt_header entries[4];
    uint8_t records[4][40];
    uint8_t values[4][100];
} raw_writev;

static size_t raw_writev_encode(const raw_writev *v, uint8_t *out, gt_header *h)
{
    size_t at = GT_HEADER_LENGTH;
    for (uint32_t i = 0; i < v->count; i++, at += GT_HEADER_LENGTH)
    {
        gt_header_encode(out + at, &v->entries[i]);
    }
    for (uint32_t i = 0; i < v->count; i++)
    {
        memcpy(out + at, v->records[i], v->entries[i].flags);
        at += v->entries[i].flags;
    }
    const size_t table = at - GT_HEADER_LENGTH;
    for (uint32_t i = 0; i < v->count; i++)
    {
        memcpy(out + at, v->values[i], v->entries[i].length);
        at += v->entries[i].length;
    }
    if (h->opcode == 0)
    {
        h->opcode = GT_OPC_WRITEV;
        h->flags = (uint16_t)v->count;
        h->offset = table;
        h->length = (uint32_t)(at - GT_HEADER_LENGTH);
    }
    gt_header_encode(out, h);
    return GT_HEADER_LENGTH + h->length;
}

static raw_writev raw_writev_of(const uint32_t count, const uint64_t at)
{
    raw_writev v;
    memset(&v, 0, sizeof(v));
    v.count = count;
    for (uint32_t i = 0; i < count; i++)
    {
        gt_header *e = &v.entries[i];
        e->opcode = GT_OPC_WRITE_COMMIT;
        e->request_id = i;
        e->segment_id = SEGMENT_ID;
        e->offset = at + i * 200u; /* a gap behind each value */
        e->length = 60 + 10 * i;
        e->flags = 40;
        v.records[i][0] = 1;
        gt_put_u64(v.records[i] + 8, e->length);
        memset(v.values[i], 0x30 + (int)i, e->length);
    }
    return v;
}

/* Sends a frame and reads the answer's header and statuses (count of them when its length says so). */
static int raw_exchange(const int fd, const uint8_t *frame, const size_t length, gt_header *answer, int32_t *statuses)
{
    uint8_t header[GT_HEADER_LENGTH];
    if (send(fd, frame, length, MSG_NOSIGNAL) != (ssize_t)length ||
        recv(fd, header, sizeof(header), MSG_WAITALL) != sizeof(header) ||
        gt_header_decode(header, 1u << 20, answer) != GT_DECODE_OK || answer->length > 16)
    {
        return 0;
    }
    uint8_t bytes[16];
    if (answer->length > 0 && recv(fd, bytes, answer->length, MSG_WAITALL) != (ssize_t)answer->length)
    {
        return 0;
    }
    for (uint32_t i = 0; i < answer->length / 4; i++)
    {
        statuses[i] = (int32_t)gt_get_u32(bytes + 4 * i);
    }
    return 1;
}

/* A PING on the connection is answered: the stream is still in sync. */
static int raw_ping(const int fd)
{
    gt_header h;
    memset(&h, 0, sizeof(h));
    h.opcode = GT_OPC_PING;
    h.request_id = 777;
    uint8_t frame[GT_HEADER_LENGTH];
    gt_header_encode(frame, &h);
    gt_header answer;
    int32_t none[4];
    return raw_exchange(fd, frame, sizeof(frame), &answer, none) &&
        answer.opcode == (GT_OPC_PING | GT_OPC_RESPONSE_BIT) && answer.request_id == 777;
}

/*
 * WRITEV frames on the server, by hand: a good one answered once with a status per entry, bytes in place and a record
 * committed each; entries refused alone (range, segment) with nothing moved; every whole-vector refusal answered
 * header-only with INVALID_PARAMS, its bytes consumed, nothing moved or committed, the connection still usable.
 */
static void writev_frames_are_checked(void)
{
    test_node node;
    CHECK(node_start(&node));
    const int fd = raw_connect(gt_server_port(node.server));
    CHECK(fd >= 0);
    uint8_t frame[GT_HEADER_LENGTH + 4 * (GT_HEADER_LENGTH + 40 + 100)];
    gt_header answer;
    int32_t statuses[4];

    raw_writev good = raw_writev_of(3, 8192);
    gt_header h;
    memset(&h, 0, sizeof(h));
    h.request_id = 41;
    size_t length = raw_writev_encode(&good, frame, &h);
    CHECK(raw_exchange(fd, frame, length, &answer, statuses));
    CHECK(answer.opcode == (GT_OPC_WRITEV | GT_OPC_RESPONSE_BIT) && answer.request_id == 41 && answer.status == 0 &&
        answer.segment_id == 0 && answer.offset == 0 && answer.length == 12);
    CHECK(statuses[0] == GT_OK && statuses[1] == GT_OK && statuses[2] == GT_OK);
    for (uint32_t i = 0; i < 3; i++)
    {
        CHECK(memcmp(node.segment + good.entries[i].offset, good.values[i], good.entries[i].length) == 0);
        CHECK(node.segment[good.entries[i].offset + good.entries[i].length] == 0);
    }
    CHECK(node.commits == 3 && node.last_commit_length == 40 && memcmp(node.last_commit, good.records[2], 40) == 0);

    raw_writev mixed = raw_writev_of(3, 16384);
    mixed.entries[1].offset = SEGMENT_BYTES - 10; /* beyond the segment */
    mixed.entries[2].segment_id = SEGMENT_ID + 1;  /* no such segment */
    memset(&h, 0, sizeof(h));
    h.request_id = 42;
    length = raw_writev_encode(&mixed, frame, &h);
    CHECK(raw_exchange(fd, frame, length, &answer, statuses));
    CHECK(answer.request_id == 42 && answer.status == 0 && answer.length == 12);
    CHECK(statuses[0] == GT_OK && statuses[1] == GT_INVALID_PARAMS && statuses[2] == GT_SEGMENT_NOT_FOUND);
    CHECK(memcmp(node.segment + 16384, mixed.values[0], mixed.entries[0].length) == 0);
    CHECK(node.segment[SEGMENT_BYTES - 10] == 0 && node.commits == 4);

    /* refused whole: the header's own fields, then a table that cannot be trusted */
    for (int kind = 0; kind < 7; kind++)
    {
        raw_writev bad = raw_writev_of(3, 32768);
        memset(&h, 0, sizeof(h));
        h.request_id = 50 + (uint64_t)kind;
        raw_writev_encode(&bad, frame, &h); /* h now holds the right fields */
        switch (kind)
        {
            case 0: h.status = GT_INVALID_PARAMS; break;             /* a request with a status */
            case 1: h.flags = 0; break;                              /* no entries */
            case 2: h.offset = 2 * GT_HEADER_LENGTH; break;          /* a table too short for its headers */
            case 3: h.offset = h.length + 1; break;                  /* a table longer than the frame */
            case 4: bad.entries[1].opcode = GT_OPC_READ; break;      /* an entry that is no WRITE_COMMIT */
            case 5: bad.entries[2].flags = 0; bad.entries[0].flags = 80; break; /* records moved: R of 0 */
            default: bad.entries[0].length += 1; break;              /* values do not add up to the frame */
        }
        if (kind >= 4)
        {
            gt_header keep = h;
            raw_writev_encode(&bad, frame, &keep); /* entries re-encoded, the header as it was */
        }
        else
        {
            gt_header_encode(frame, &h);
        }
        /* the frame's own length says what the node consumes */
        length = GT_HEADER_LENGTH + h.length;
        CHECK(raw_exchange(fd, frame, length, &answer, statuses));
        CHECK(answer.opcode == (GT_OPC_WRITEV | GT_OPC_RESPONSE_BIT) && answer.request_id == 50 + (uint64_t)kind &&
            answer.status == GT_INVALID_PARAMS && answer.length == 0);
        CHECK(node.segment[32768] == 0 && node.commits == 4);
        CHECK(raw_ping(fd));
    }
    /* two vectors had entries to pass on, two calls each; the refused ones none */
    CHECK(node.vector_upcalls == (node_vector_upcalls ? 4 : 0));
    close(fd);
    node_stop(&node);
}

/* Batches of small READs against the native server: vectors formed by count and bytes, every byte and status right. */
static void small_reads_leave_as_vectors(void)
{
    test_node node;
    CHECK(node_start(&node));
    fill_pattern(node.segment, SEGMENT_BYTES, 11);
    gt_error error;
    gt_engine_config bad;
    gt_engine_config_defaults(&bad);
    gt_engine *none = NULL;
    bad.max_vector_entries = 0;
    CHECK(gt_engine_create(&bad, &none, &error) == GT_INVALID_PARAMS && none == NULL);
    bad.max_vector_entries = GT_MAX_VECTOR_ENTRIES + 1;
    CHECK(gt_engine_create(&bad, &none, &error) == GT_INVALID_PARAMS && none == NULL);

    enum { READS = 130 };
    const size_t capacity = (size_t)READS * (64u << 10);
    uint8_t *in = malloc(capacity);
    CHECK(in != NULL);
    /* lanes, entries per vector, bytes per read, and the READVs the node must see */
    static const uint32_t shapes[][4] = {
        { 2, 256, 4096, 2 },       /* 65 reads per lane: one vector each */
        { 2, 16, 4096, 8 },        /* 65 per lane: 16 + 16 + 16 + 16 + 1 (alone) */
        { 1, 256, 64u << 10, 3 },  /* 4 MiB per vector at most: 64 + 64 + 2 */
        { 2, 1, 4096, 0 },         /* vectors off */
    };
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
    {
        gt_engine *engine = engine_with(shapes[s][0], shapes[s][1], 5000);
        CHECK(engine != NULL);
        uint32_t peer;
        uint32_t region;
        CHECK(gt_engine_connect(engine, "127.0.0.1", gt_server_port(node.server), &peer, &error) == GT_OK);
        CHECK(gt_engine_register_memory(engine, in, capacity, &region, &error) == GT_OK);
        const uint32_t length = shapes[s][2];
        memset(in, 0, capacity);
        gt_op ops[READS + 3];
        for (int i = 0; i < READS; i++)
        {
            /* distinct, overlapping offsets spread over the segment */
            const uint64_t remote = ((uint64_t)i * 40961u) % (SEGMENT_BYTES - length);
            ops[i] = op_of((uint64_t)i + 1, peer, GT_OP_READ, region, (uint64_t)i * length, length, remote);
        }
        int n = READS;
        if (s == 0)
        {
            /* refused entries among them, and a big read that goes alone between vectors */
            ops[7].segment_id = 99;
            ops[40].remote_offset = SEGMENT_BYTES - 10;
            ops[40].grant_offset = ops[40].remote_offset;
            ops[n++] = op_of(1000, peer, GT_OP_READ, region, (size_t)READS * 4096, 300000, 12345);
        }
        gt_server_stats before;
        gt_server_get_stats(node.server, &before);
        CHECK(gt_engine_submit(engine, ops, n, &error) == n);
        gt_completion done[READS + 3];
        CHECK(await(engine, done, n, 10000) == n);
        for (int i = 0; i < n; i++)
        {
            const int32_t status = status_of(done, n, ops[i].user_data);
            if (s == 0 && i == 7)
            {
                CHECK(status == GT_SEGMENT_NOT_FOUND);
                continue;
            }
            if (s == 0 && i == 40)
            {
                CHECK(status == GT_INVALID_PARAMS);
                continue;
            }
            CHECK(status == GT_OK);
            CHECK(memcmp(in + ops[i].local_offset, node.segment + ops[i].remote_offset, ops[i].length) == 0);
        }
        if (s == 0)
        {
            CHECK(in[7 * length] == 0 && in[7 * length + length - 1] == 0); /* the refused read moved nothing */
        }
        gt_server_stats after;
        gt_server_get_stats(node.server, &after);
        CHECK(after.read_vectors - before.read_vectors == shapes[s][3]);
        CHECK(after.requests - before.requests == (uint64_t)n);
        CHECK(gt_engine_region_count(engine) == 1);
        gt_engine_destroy(engine);
    }
    free(in);
    node_stop(&node);
}

/* An engine with two lanes per peer, 128 KiB slices and spread_min_bytes spread, connected to node, memory registered. */
static gt_engine *spreading_engine(test_node *node, const uint32_t spread, uint8_t *memory, const size_t capacity,
    uint32_t *peer, uint32_t *region)
{
    gt_engine_config config;
    gt_engine_config_defaults(&config);
    config.local_transfers = client_local_transfers;
    config.lanes_per_peer = 2;
    config.slice_bytes = 128u << 10;
    config.spread_min_bytes = spread;
    gt_engine *engine = NULL;
    gt_error error;
    if (gt_engine_create(&config, &engine, &error) != GT_OK)
    {
        return NULL;
    }
    if (gt_engine_connect(engine, "127.0.0.1", gt_server_port(node->server), peer, &error) != GT_OK ||
        gt_engine_register_memory(engine, memory, capacity, region, &error) != GT_OK)
    {
        gt_engine_destroy(engine);
        return NULL;
    }
    return engine;
}

/*
 * spread_min_bytes: with it, a batch of small READs and a small WRITE keep to a peer's first lane and only the
 * slices of a big value go round-robin (the second connection opens for them); without it (0, the default) small
 * frames take every lane. Every byte checked.
 */
static void only_big_frames_spread_over_the_lanes(void)
{
    test_node node;
    CHECK(node_start(&node));
    fill_pattern(node.segment, SEGMENT_BYTES, 23);
    enum { SMALL = 24, SMALL_BYTES = 4096, BIG_BYTES = 512u << 10 };
    const size_t capacity = (size_t)SMALL * SMALL_BYTES + BIG_BYTES + SMALL_BYTES;
    uint8_t *in = malloc(capacity);
    CHECK(in != NULL);
    gt_engine_config defaults;
    gt_engine_config_defaults(&defaults);
    CHECK(defaults.spread_min_bytes == 0);
    static const uint32_t spreads[] = { 0, (64u << 10) + 1 };
    for (size_t s = 0; s < sizeof(spreads) / sizeof(spreads[0]); s++)
    {
        uint32_t peer;
        uint32_t region;
        gt_engine *engine = spreading_engine(&node, spreads[s], in, capacity, &peer, &region);
        CHECK(engine != NULL);
        gt_error error;
        memset(in, 0, capacity);
        gt_server_stats before;
        gt_server_get_stats(node.server, &before);

        gt_op ops[SMALL + 1];
        for (int i = 0; i < SMALL; i++)
        {
            ops[i] = op_of((uint64_t)i + 1, peer, GT_OP_READ, region, (uint64_t)i * SMALL_BYTES, SMALL_BYTES,
                (uint64_t)i * 81923u % (SEGMENT_BYTES - SMALL_BYTES));
        }
        /* a small WRITE of bytes the test knows, to the segment's last page */
        const uint64_t write_local = (uint64_t)SMALL * SMALL_BYTES + BIG_BYTES;
        memset(in + write_local, 0x5A + (int)s, SMALL_BYTES);
        ops[SMALL] = op_of(500, peer, GT_OP_WRITE, region, write_local, SMALL_BYTES, SEGMENT_BYTES - SMALL_BYTES);
        CHECK(gt_engine_submit(engine, ops, SMALL + 1, &error) == SMALL + 1);
        gt_completion done[SMALL + 1];
        CHECK(await(engine, done, SMALL + 1, 10000) == SMALL + 1);
        for (int i = 0; i < SMALL; i++)
        {
            CHECK(status_of(done, SMALL + 1, ops[i].user_data) == GT_OK);
            CHECK(memcmp(in + ops[i].local_offset, node.segment + ops[i].remote_offset, SMALL_BYTES) == 0);
        }
        CHECK(status_of(done, SMALL + 1, 500) == GT_OK);
        CHECK(node.segment[SEGMENT_BYTES - 1] == (uint8_t)(0x5A + (int)s));
        gt_server_stats small;
        gt_server_get_stats(node.server, &small);
        CHECK(small.connections_opened - before.connections_opened == (spreads[s] == 0 ? 2u : 1u));

        /* a big READ: four slices of 128 KiB, round-robin over both lanes either way */
        const uint64_t big_local = (uint64_t)SMALL * SMALL_BYTES;
        gt_op big = op_of(600, peer, GT_OP_READ, region, big_local, BIG_BYTES, 12288);
        CHECK(gt_engine_submit(engine, &big, 1, &error) == 1);
        CHECK(await(engine, done, 1, 10000) == 1 && done[0].status == GT_OK);
        CHECK(memcmp(in + big_local, node.segment + 12288, BIG_BYTES) == 0);
        gt_server_stats after;
        gt_server_get_stats(node.server, &after);
        CHECK(after.connections_opened - before.connections_opened == 2);
        CHECK(after.requests - small.requests == 4);
        gt_engine_destroy(engine);
    }
    free(in);
    node_stop(&node);
}

/*
 * With spread_min_bytes, a call that reads several big values keeps every slice of them on the first lane (one
 * connection opened), a lone big value's slices and a call's big WRITEs still spread (the second opens). Every
 * byte checked.
 */
static void a_call_reading_several_big_values_keeps_to_one_lane(void)
{
    test_node node;
    CHECK(node_start(&node));
    fill_pattern(node.segment, SEGMENT_BYTES, 29);
    enum { VALUES = 3, BIG = 256u << 10 };
    uint8_t *in = malloc((size_t)VALUES * BIG);
    CHECK(in != NULL);
    const uint32_t spread = (64u << 10) + 1;
    uint32_t peer;
    uint32_t region;
    gt_engine *engine = spreading_engine(&node, spread, in, (size_t)VALUES * BIG, &peer, &region);
    CHECK(engine != NULL);
    gt_error error;
    gt_server_stats before;
    gt_server_get_stats(node.server, &before);

    gt_op reads[VALUES];
    for (int i = 0; i < VALUES; i++)
    {
        reads[i] = op_of((uint64_t)i + 1, peer, GT_OP_READ, region, (uint64_t)i * BIG, BIG, 4096u + 300000u * i);
    }
    CHECK(gt_engine_submit(engine, reads, VALUES, &error) == VALUES);
    gt_completion done[VALUES];
    CHECK(await(engine, done, VALUES, 10000) == VALUES);
    for (int i = 0; i < VALUES; i++)
    {
        CHECK(status_of(done, VALUES, reads[i].user_data) == GT_OK);
        CHECK(memcmp(in + reads[i].local_offset, node.segment + reads[i].remote_offset, BIG) == 0);
    }
    gt_server_stats together;
    gt_server_get_stats(node.server, &together);
    CHECK(together.requests - before.requests == 2u * VALUES);
    CHECK(together.connections_opened - before.connections_opened == 1);

    /* one big value alone: its two slices spread */
    memset(in, 0, BIG);
    gt_op lone = op_of(10, peer, GT_OP_READ, region, 0, BIG, 777777);
    CHECK(gt_engine_submit(engine, &lone, 1, &error) == 1);
    CHECK(await(engine, done, 1, 10000) == 1 && done[0].status == GT_OK);
    CHECK(memcmp(in, node.segment + 777777, BIG) == 0);
    gt_server_stats after;
    gt_server_get_stats(node.server, &after);
    CHECK(after.connections_opened - before.connections_opened == 2);
    gt_engine_destroy(engine);

    /* several big WRITEs of one call still spread */
    engine = spreading_engine(&node, spread, in, (size_t)VALUES * BIG, &peer, &region);
    CHECK(engine != NULL);
    fill_pattern(in, (size_t)VALUES * BIG, 41);
    gt_op writes[VALUES];
    for (int i = 0; i < VALUES; i++)
    {
        writes[i] = op_of((uint64_t)i + 20, peer, GT_OP_WRITE, region, (uint64_t)i * BIG, BIG, 2000000u + 300000u * i);
    }
    CHECK(gt_engine_submit(engine, writes, VALUES, &error) == VALUES);
    CHECK(await(engine, done, VALUES, 10000) == VALUES);
    for (int i = 0; i < VALUES; i++)
    {
        CHECK(status_of(done, VALUES, writes[i].user_data) == GT_OK);
        CHECK(memcmp(node.segment + writes[i].remote_offset, in + writes[i].local_offset, BIG) == 0);
    }
    gt_server_stats written;
    gt_server_get_stats(node.server, &written);
    CHECK(written.connections_opened - after.connections_opened == 2);
    gt_engine_destroy(engine);
    free(in);
    node_stop(&node);
}

/* A peer played by the test: accepts the engine's one lane and reads its frames (blocking, 5 s timeout). */
typedef struct scripted_peer
{
    silent_server listener;
    int fd;
} scripted_peer;

static void drive(gt_engine *engine, const int turns)
{
    gt_completion ignored[4];
    for (int i = 0; i < turns; i++)
    {
        CHECK(gt_engine_poll(engine, ignored, 1, 5) == 0);
    }
}

static int accept_lane(scripted_peer *p)
{
    p->fd = accept(p->listener.fd, NULL, NULL);
    if (p->fd < 0)
    {
        return 0;
    }
    struct timeval timeout = { .tv_sec = 5, .tv_usec = 0 };
    setsockopt(p->fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    return 1;
}

/* Reads one READV request of count entries; fills the request id and the entries' offsets. */
static int read_vector(scripted_peer *p, const uint32_t count, uint64_t *request_id, uint64_t *offsets)
{
    uint8_t bytes[GT_HEADER_LENGTH];
    gt_header h;
    if (recv(p->fd, bytes, sizeof(bytes), MSG_WAITALL) != GT_HEADER_LENGTH ||
        gt_header_decode(bytes, GT_MAX_FRAME_LENGTH_LIMIT, &h) != GT_DECODE_OK || h.opcode != GT_OPC_READV ||
        h.length != count * GT_HEADER_LENGTH || h.segment_id != 0 || h.offset != 0 || h.status != 0)
    {
        return 0;
    }
    *request_id = h.request_id;
    for (uint32_t i = 0; i < count; i++)
    {
        gt_header entry;
        if (recv(p->fd, bytes, sizeof(bytes), MSG_WAITALL) != GT_HEADER_LENGTH ||
            gt_header_decode(bytes, GT_MAX_FRAME_LENGTH_LIMIT, &entry) != GT_DECODE_OK ||
            entry.opcode != GT_OPC_READ || entry.request_id != i || entry.segment_id != SEGMENT_ID)
        {
            return 0;
        }
        offsets[i] = entry.offset;
    }
    return 1;
}

/* A READV_RESPONSE: header fields as given, then statuses and payload. */
static int answer_vector_as(scripted_peer *p, const int opcode, const uint64_t request_id, const uint32_t segment_id,
    const int32_t status, const uint64_t offset, const uint32_t length, const int32_t *statuses, const uint32_t count,
    const uint8_t *payload, const uint32_t payload_length)
{
    uint8_t out[GT_HEADER_LENGTH + 4 * 64 + 64 * 64];
    gt_header h;
    memset(&h, 0, sizeof(h));
    h.opcode = (uint8_t)(opcode | GT_OPC_RESPONSE_BIT);
    h.request_id = request_id;
    h.segment_id = segment_id;
    h.status = status;
    h.offset = offset;
    h.length = length;
    gt_header_encode(out, &h);
    size_t at = GT_HEADER_LENGTH;
    for (uint32_t i = 0; i < count; i++, at += 4)
    {
        gt_put_u32(out + at, (uint32_t)statuses[i]);
    }
    if (payload_length > 0)
    {
        memcpy(out + at, payload, payload_length);
        at += payload_length;
    }
    return send(p->fd, out, at, MSG_NOSIGNAL) == (ssize_t)at;
}

static int answer_vector(scripted_peer *p, const uint64_t request_id, const uint32_t segment_id, const int32_t status,
    const uint64_t offset, const uint32_t length, const int32_t *statuses, const uint32_t count,
    const uint8_t *payload, const uint32_t payload_length)
{
    return answer_vector_as(p, GT_OPC_READV, request_id, segment_id, status, offset, length, statuses, count, payload,
        payload_length);
}

/* The connection is closed by the engine (1) or still open (0) within a short wait. */
static int lane_closed(scripted_peer *p)
{
    struct timeval timeout = { .tv_sec = 0, .tv_usec = 300000 };
    setsockopt(p->fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    uint8_t byte;
    const ssize_t n = recv(p->fd, &byte, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

enum vector_answer
{
    ANSWER_MIXED,           /* every third entry refused, the others their bytes */
    ANSWER_SHORT_COUNT,     /* statuses worth one byte more than announced: the vector fails, the lane stays */
    ANSWER_TOO_LONG,        /* more than every byte asked for: the lane closes */
    ANSWER_REFUSED,         /* a whole-vector refusal: every read gets it, the lane stays */
    ANSWER_REFUSED_LENGTH,  /* a refusal that carries a length: the lane closes */
    ANSWER_NOT_ECHOED,      /* segment id not 0: the lane closes */
    ANSWER_UNKNOWN_STATUS,  /* an entry status that is no ErrorCode: the lane closes */
    ANSWER_NONE             /* never answered: the vector times out as one frame */
};

static void vector_answers_are_checked(void)
{
    enum { COUNT = 20, BYTES = 10 };
    for (int kind = ANSWER_MIXED; kind <= ANSWER_NONE; kind++)
    {
        scripted_peer p;
        CHECK(silent_start(&p.listener));
        gt_engine *engine = engine_with(1, 256, kind == ANSWER_NONE ? 300 : 5000);
        CHECK(engine != NULL);
        uint32_t peer;
        gt_error error;
        CHECK(gt_engine_connect(engine, "127.0.0.1", p.listener.port, &peer, &error) == GT_OK);
        uint8_t in[COUNT * BYTES];
        memset(in, 0xEE, sizeof(in));
        uint32_t region;
        CHECK(gt_engine_register_memory(engine, in, sizeof(in), &region, &error) == GT_OK);
        gt_op ops[COUNT];
        for (int i = 0; i < COUNT; i++)
        {
            ops[i] = op_of((uint64_t)i + 1, peer, GT_OP_READ, region, (uint64_t)i * BYTES, BYTES, 1000u * (uint64_t)i);
        }
        CHECK(gt_engine_submit(engine, ops, COUNT, &error) == COUNT);
        drive(engine, 4);
        CHECK(accept_lane(&p));
        uint64_t id;
        uint64_t offsets[COUNT];
        CHECK(read_vector(&p, COUNT, &id, offsets));
        for (int i = 0; i < COUNT; i++)
        {
            CHECK(offsets[i] == 1000u * (uint64_t)i);
        }
        int32_t statuses[COUNT];
        uint8_t payload[COUNT * BYTES];
        uint32_t payload_length = 0;
        for (int i = 0; i < COUNT; i++)
        {
            statuses[i] = kind == ANSWER_MIXED && i % 3 == 0 ? GT_SEGMENT_NOT_FOUND : 0;
            if (kind == ANSWER_UNKNOWN_STATUS && i == 5)
            {
                statuses[i] = -4242;
            }
            if (statuses[i] == 0)
            {
                memset(payload + payload_length, i + 1, BYTES);
                payload_length += BYTES;
            }
        }
        const uint32_t full = COUNT * 4 + payload_length;
        int answered = 1;
        switch (kind)
        {
            case ANSWER_MIXED:
            case ANSWER_UNKNOWN_STATUS:
                answered = answer_vector(&p, id, 0, 0, 0, full, statuses, COUNT, payload, payload_length);
                break;
            case ANSWER_SHORT_COUNT:
                answered = answer_vector(&p, id, 0, 0, 0, full - 1, statuses, COUNT, payload, payload_length - 1);
                break;
            case ANSWER_TOO_LONG:
                answered = answer_vector(&p, id, 0, 0, 0, full + 1, statuses, COUNT, payload, payload_length);
                break;
            case ANSWER_REFUSED:
                answered = answer_vector(&p, id, 0, GT_INVALID_PARAMS, 0, 0, NULL, 0, NULL, 0);
                break;
            case ANSWER_REFUSED_LENGTH:
                answered = answer_vector(&p, id, 0, GT_INVALID_PARAMS, 0, 64, NULL, 0, NULL, 0);
                break;
            case ANSWER_NOT_ECHOED:
                answered = answer_vector(&p, id, SEGMENT_ID, 0, 0, full, statuses, COUNT, payload, payload_length);
                break;
            default:
                break;
        }
        CHECK(answered);
        gt_completion done[COUNT];
        CHECK(await(engine, done, COUNT, 5000) == COUNT);
        for (int i = 0; i < COUNT; i++)
        {
            const int32_t status = status_of(done, COUNT, (uint64_t)i + 1);
            int32_t expected = GT_TRANSFER_FAIL;
            if (kind == ANSWER_MIXED)
            {
                expected = statuses[i];
            }
            else if (kind == ANSWER_REFUSED)
            {
                expected = GT_INVALID_PARAMS;
            }
            else if (kind == ANSWER_NONE)
            {
                expected = GT_RPC_TIMEOUT;
            }
            CHECK(status == expected);
            uint8_t want[BYTES];
            memset(want, kind == ANSWER_MIXED && status == GT_OK ? i + 1 : 0xEE, BYTES);
            if (kind != ANSWER_SHORT_COUNT && kind != ANSWER_TOO_LONG && kind != ANSWER_UNKNOWN_STATUS)
            {
                CHECK(memcmp(in + i * BYTES, want, BYTES) == 0); /* no byte of a failed read was touched */
            }
        }
        const int keeps_lane = kind == ANSWER_MIXED || kind == ANSWER_SHORT_COUNT || kind == ANSWER_REFUSED ||
            kind == ANSWER_NONE;
        if (keeps_lane && kind != ANSWER_NONE)
        {
            /* the same connection carries the next read: the stream stayed in sync */
            gt_op next = op_of(99, peer, GT_OP_READ, region, 0, BYTES, 777);
            CHECK(gt_engine_submit(engine, &next, 1, &error) == 1);
            drive(engine, 3);
            uint8_t bytes[GT_HEADER_LENGTH];
            gt_header h;
            CHECK(recv(p.fd, bytes, sizeof(bytes), MSG_WAITALL) == GT_HEADER_LENGTH);
            CHECK(gt_header_decode(bytes, GT_MAX_FRAME_LENGTH_LIMIT, &h) == GT_DECODE_OK && h.opcode == GT_OPC_READ &&
                h.offset == 777);
            uint8_t answer[GT_HEADER_LENGTH + BYTES];
            h.opcode = GT_OPC_READ | GT_OPC_RESPONSE_BIT;
            memset(h.token_mac, 0, sizeof(h.token_mac));
            h.token_expiry = h.grant_delta = h.grant_length = 0;
            gt_header_encode(answer, &h);
            memset(answer + GT_HEADER_LENGTH, 0x42, BYTES);
            CHECK(send(p.fd, answer, sizeof(answer), MSG_NOSIGNAL) == (ssize_t)sizeof(answer));
            CHECK(await(engine, done, 1, 5000) == 1 && done[0].user_data == 99 && done[0].status == GT_OK);
            CHECK(in[0] == 0x42 && in[BYTES - 1] == 0x42);
        }
        else if (!keeps_lane)
        {
            CHECK(lane_closed(&p));
        }
        gt_engine_destroy(engine);
        close(p.fd);
        close(p.listener.fd);
    }
}

/*
 * The engine's side of a WRITEV answer: statuses per entry, a header-only refusal for all of them, and an answer
 * whose length is not four bytes per entry fails them all and closes the lane.
 */
static void write_vector_answers_are_checked(void)
{
    enum { COUNT = 6, BYTES = 100 };
    for (int kind = 0; kind < 3; kind++)
    {
        scripted_peer p;
        CHECK(silent_start(&p.listener));
        gt_engine *engine = engine_with(1, 256, 5000);
        CHECK(engine != NULL);
        uint32_t peer;
        gt_error error;
        CHECK(gt_engine_connect(engine, "127.0.0.1", p.listener.port, &peer, &error) == GT_OK);
        uint8_t out[COUNT * BYTES];
        fill_pattern(out, sizeof(out), 3);
        uint32_t region;
        CHECK(gt_engine_register_memory(engine, out, sizeof(out), &region, &error) == GT_OK);
        uint8_t record[40] = { 1 };
        gt_put_u64(record + 8, BYTES);
        gt_op ops[COUNT];
        for (int i = 0; i < COUNT; i++)
        {
            ops[i] = op_of((uint64_t)i + 1, peer, GT_OP_WRITE, region, (uint64_t)i * BYTES, BYTES, 1000u * (uint64_t)i);
            ops[i].commit = record;
            ops[i].commit_length = sizeof(record);
        }
        CHECK(gt_engine_submit(engine, ops, COUNT, &error) == COUNT);
        drive(engine, 4);
        CHECK(accept_lane(&p));
        /* the frame as the protocol says: table of headers and records, then the values in entry order */
        uint8_t bytes[GT_HEADER_LENGTH + COUNT * (GT_HEADER_LENGTH + 40 + BYTES)];
        gt_header h;
        CHECK(recv(p.fd, bytes, GT_HEADER_LENGTH, MSG_WAITALL) == GT_HEADER_LENGTH);
        CHECK(gt_header_decode(bytes, GT_MAX_FRAME_LENGTH_LIMIT, &h) == GT_DECODE_OK && h.opcode == GT_OPC_WRITEV &&
            h.flags == COUNT && h.offset == COUNT * (GT_HEADER_LENGTH + 40) &&
            h.length == COUNT * (GT_HEADER_LENGTH + 40 + BYTES) && h.segment_id == 0 && h.status == 0);
        CHECK(recv(p.fd, bytes, h.length, MSG_WAITALL) == (ssize_t)h.length);
        for (int i = 0; i < COUNT; i++)
        {
            gt_header e;
            CHECK(gt_header_decode(bytes + i * GT_HEADER_LENGTH, GT_MAX_FRAME_LENGTH_LIMIT, &e) == GT_DECODE_OK &&
                e.opcode == GT_OPC_WRITE_COMMIT && e.request_id == (uint64_t)i && e.flags == 40 &&
                e.offset == 1000u * (uint64_t)i && e.length == BYTES);
            CHECK(memcmp(bytes + COUNT * GT_HEADER_LENGTH + i * 40, record, 40) == 0);
            CHECK(memcmp(bytes + h.offset + i * BYTES, out + i * BYTES, BYTES) == 0);
        }
        int32_t statuses[COUNT] = { 0, GT_SEGMENT_NOT_FOUND, 0, 0, GT_INVALID_PARAMS, 0 };
        if (kind == 0)
        {
            CHECK(answer_vector_as(&p, GT_OPC_WRITEV, h.request_id, 0, 0, 0, COUNT * 4, statuses, COUNT, NULL, 0));
        }
        else if (kind == 1)
        {
            CHECK(answer_vector_as(&p, GT_OPC_WRITEV, h.request_id, 0, GT_INVALID_PARAMS, 0, 0, NULL, 0, NULL, 0));
        }
        else
        {
            /* one status short: no way to tell where the stream goes on */
            CHECK(answer_vector_as(&p, GT_OPC_WRITEV, h.request_id, 0, 0, 0, COUNT * 4 - 4, statuses, COUNT - 1,
                NULL, 0));
        }
        gt_completion done[COUNT];
        CHECK(await(engine, done, COUNT, 5000) == COUNT);
        for (int i = 0; i < COUNT; i++)
        {
            const int32_t expected = kind == 0 ? statuses[i] : kind == 1 ? GT_INVALID_PARAMS : GT_TRANSFER_FAIL;
            CHECK(status_of(done, COUNT, (uint64_t)i + 1) == expected);
        }
        CHECK(lane_closed(&p) == (kind == 2));
        gt_engine_destroy(engine);
        close(p.fd);
        close(p.listener.fd);
    }
}

/*
 * A node on this host that accepts the LOCAL_CONNECT exchange and never answers holds the caller for a short wait,
 * not for its connect timeout (20 s here): the READ then goes over TCP on the next connection.
 */
static void a_silent_same_host_node_holds_the_caller_briefly(void)
{
    silent_server silent;
    CHECK(silent_start(&silent));
    gt_engine_config config;
    gt_engine_config_defaults(&config);
    config.local_transfers = 1;
    config.connect_timeout_ms = 20000;
    config.transfer_timeout_ms = 30000;
    gt_engine *engine = NULL;
    gt_error error;
    CHECK(gt_engine_create(&config, &engine, &error) == GT_OK);
    uint32_t peer;
    CHECK(gt_engine_connect(engine, "127.0.0.1", silent.port, &peer, &error) == GT_OK);
    uint8_t data[4096];
    uint32_t region;
    CHECK(gt_engine_register_memory(engine, data, sizeof(data), &region, &error) == GT_OK);
    const uint64_t start = gt_now_ms();
    gt_op read = op_of(1, peer, GT_OP_READ, region, 0, sizeof(data), 4096);
    CHECK(gt_engine_submit(engine, &read, 1, &error) == 1);
    drive(engine, 3);
    scripted_peer p;
    p.listener = silent;
    uint8_t bytes[GT_HEADER_LENGTH];
    gt_header h;
    /* the first connection carried the exchange, left unanswered */
    CHECK(accept_lane(&p));
    CHECK(recv(p.fd, bytes, sizeof(bytes), MSG_WAITALL) == GT_HEADER_LENGTH);
    CHECK(gt_header_decode(bytes, GT_MAX_FRAME_LENGTH_LIMIT, &h) == GT_DECODE_OK && h.opcode == GT_OPC_LOCAL_CONNECT);
    close(p.fd);
    /* the next one carries the READ */
    CHECK(accept_lane(&p));
    CHECK(recv(p.fd, bytes, sizeof(bytes), MSG_WAITALL) == GT_HEADER_LENGTH);
    CHECK(gt_header_decode(bytes, GT_MAX_FRAME_LENGTH_LIMIT, &h) == GT_DECODE_OK && h.opcode == GT_OPC_READ &&
        h.offset == 4096);
    CHECK(gt_now_ms() - start < 5000); /* far below the 20 s connect timeout the exchange used to wait out */
    gt_engine_destroy(engine);
    close(p.fd);
    close(silent.fd);
}

/* Reads one frame of opcode (header, then its payload into payload, at most capacity bytes); 0 if it is not that. */
static int read_frame(scripted_peer *p, const uint8_t opcode, gt_header *h, uint8_t *payload, const uint32_t capacity)
{
    uint8_t bytes[GT_HEADER_LENGTH];
    if (recv(p->fd, bytes, sizeof(bytes), MSG_WAITALL) != GT_HEADER_LENGTH ||
        gt_header_decode(bytes, GT_MAX_FRAME_LENGTH_LIMIT, h) != GT_DECODE_OK || h->opcode != opcode ||
        h->length > capacity)
    {
        return 0;
    }
    return h->length == 0 || recv(p->fd, payload, h->length, MSG_WAITALL) == (ssize_t)h->length;
}

/* A header-only answer to request (a WRITE or COMMIT) with status. */
static int answer_frame(scripted_peer *p, const gt_header *request, const int32_t status)
{
    gt_header h = *request;
    h.opcode = request->opcode | GT_OPC_RESPONSE_BIT;
    h.status = status;
    memset(h.token_mac, 0, sizeof(h.token_mac));
    h.token_expiry = h.grant_delta = h.grant_length = 0;
    uint8_t out[GT_HEADER_LENGTH];
    gt_header_encode(out, &h);
    return send(p->fd, out, sizeof(out), MSG_NOSIGNAL) == (ssize_t)sizeof(out);
}

/* Nothing has arrived on the connection (it is open and quiet). */
static int nothing_arrived(scripted_peer *p)
{
    uint8_t byte;
    return recv(p->fd, &byte, 1, MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/*
 * A sliced WRITE's COMMIT leaves as soon as every slice but one is acknowledged, behind the unanswered one on its
 * connection and before that slice's answer; when a slice is refused, no COMMIT leaves and the transfer fails with
 * the refusal. Two lanes, two slices, one per lane, answered by the test.
 */
static void sliced_write_commits_behind_its_last_unanswered_slice(void)
{
    enum { SLICE = 4096, VALUE = 2 * SLICE };
    scripted_peer lanes[2];
    silent_server listener;
    CHECK(silent_start(&listener));
    gt_engine_config config;
    gt_engine_config_defaults(&config);
    config.local_transfers = client_local_transfers;
    config.lanes_per_peer = 2;
    config.slice_bytes = SLICE;
    gt_engine *engine = NULL;
    gt_error error;
    CHECK(gt_engine_create(&config, &engine, &error) == GT_OK);
    uint32_t peer;
    CHECK(gt_engine_connect(engine, "127.0.0.1", listener.port, &peer, &error) == GT_OK);
    uint8_t data[VALUE];
    fill_pattern(data, sizeof(data), 31);
    uint32_t region;
    CHECK(gt_engine_register_memory(engine, data, sizeof(data), &region, &error) == GT_OK);
    const uint8_t record[6] = { 6, 5, 4, 3, 2, 1 };
    for (int refused = 0; refused <= 1; refused++)
    {
        const uint64_t extent = 65536u * (uint64_t)(refused + 1);
        gt_op write = op_of((uint64_t)(refused + 1), peer, GT_OP_WRITE, region, 0, VALUE, extent);
        write.commit = record;
        write.commit_length = sizeof(record);
        CHECK(gt_engine_submit(engine, &write, 1, &error) == 1);
        drive(engine, 4);
        if (!refused)
        {
            for (int i = 0; i < 2; i++)
            {
                lanes[i].listener = listener;
                CHECK(accept_lane(&lanes[i]));
            }
        }
        /* one slice on each connection, every byte as sent */
        gt_header slices[2];
        uint8_t payload[SLICE];
        for (int i = 0; i < 2; i++)
        {
            CHECK(read_frame(&lanes[i], GT_OPC_WRITE, &slices[i], payload, sizeof(payload)));
            CHECK(slices[i].length == SLICE && slices[i].offset >= extent && slices[i].offset < extent + VALUE);
            CHECK(memcmp(payload, data + (slices[i].offset - extent), SLICE) == 0);
        }
        CHECK(slices[0].offset != slices[1].offset);
        /* the second connection's slice is acknowledged (or refused) first */
        CHECK(answer_frame(&lanes[1], &slices[1], refused ? GT_INVALID_PARAMS : GT_OK));
        drive(engine, 4);
        gt_completion done[1];
        CHECK(gt_engine_poll(engine, done, 1, 0) == 0); /* the first slice is still unanswered */
        CHECK(nothing_arrived(&lanes[1]));
        gt_header commit;
        if (!refused)
        {
            /* behind the unanswered slice, on its connection, before its answer */
            uint8_t got[sizeof(record)];
            CHECK(read_frame(&lanes[0], GT_OPC_COMMIT, &commit, got, sizeof(got)));
            CHECK(commit.offset == extent && commit.length == sizeof(record) && memcmp(got, record, 6) == 0);
        }
        CHECK(nothing_arrived(&lanes[0]));
        CHECK(answer_frame(&lanes[0], &slices[0], GT_OK));
        if (!refused)
        {
            CHECK(answer_frame(&lanes[0], &commit, GT_OK));
        }
        CHECK(await(engine, done, 1, 5000) == 1 && done[0].user_data == (uint64_t)(refused + 1));
        CHECK(done[0].status == (refused ? GT_INVALID_PARAMS : GT_OK));
        drive(engine, 2);
        CHECK(nothing_arrived(&lanes[0]) && nothing_arrived(&lanes[1])); /* no COMMIT after a refused slice */
    }
    gt_engine_destroy(engine);
    close(lanes[0].fd);
    close(lanes[1].fd);
    close(listener.fd);
}

/* One client thread of the several-loops test: its own engine and lanes, its own 1 MiB area of the segment. */
typedef struct loop_client
{
    test_node *node;
    gt_engine *engine;
    uint32_t peer;
    uint32_t index;
    const gt_hmac_key *key;
    uint64_t duration_ms;
    uint64_t rounds;
    uint64_t write_frames;
    uint64_t bytes;
    int failures;
} loop_client;

#define LOOP_AREA (1u << 20)
#define LOOP_SLICE (64u << 10)

static gt_op signed_op(const gt_hmac_key *key, const uint64_t user_data, const uint32_t peer, const uint8_t opcode,
    const uint32_t region, const uint64_t local_offset, const uint32_t length, const uint32_t segment,
    const uint64_t remote_offset)
{
    gt_op op = op_of(user_data, peer, opcode, region, local_offset, length, remote_offset);
    op.segment_id = segment;
    op.has_token = 1;
    sign_token(key, opcode == GT_OP_READ ? GT_OPC_READ : GT_OPC_WRITE, segment, remote_offset, length,
        (uint32_t)(gt_epoch_ms() / 1000 + 600), op.token);
    return op;
}

static void *loop_client_run(void *argument)
{
    loop_client *c = argument;
    enum { OPS = 24 };
    uint8_t *out = malloc(LOOP_AREA);
    uint8_t *in = malloc(LOOP_AREA);
    uint32_t out_region;
    uint32_t in_region;
    gt_error error;
    if (out == NULL || in == NULL || gt_engine_register_memory(c->engine, out, LOOP_AREA, &out_region, &error) != 0 ||
        gt_engine_register_memory(c->engine, in, LOOP_AREA, &in_region, &error) != 0)
    {
        c->failures++;
        free(out);
        free(in);
        return NULL;
    }
    const uint64_t base = (uint64_t)c->index * LOOP_AREA;
    uint32_t x = 17 + c->index;
    const uint64_t until = gt_now_ms() + c->duration_ms;
    while (gt_now_ms() < until && c->failures == 0)
    {
        /* OPS disjoint pieces of the area: small ones (READVs on the way back) and sliced ones */
        gt_op ops[OPS];
        uint32_t at = 0;
        int n = 0;
        for (; n < OPS; n++)
        {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            const uint32_t length = n % 4 == 3 ? 100000 + x % 100000 : 1 + x % 9000;
            if (at + length > LOOP_AREA)
            {
                break;
            }
            fill_pattern(out + at, length, x);
            ops[n] = signed_op(c->key, (uint64_t)n, c->peer, GT_OP_WRITE, out_region, at, length, SEGMENT_ID,
                base + at);
            c->write_frames += (length + LOOP_SLICE - 1) / LOOP_SLICE;
            at += length;
        }
        gt_completion done[OPS];
        if (gt_engine_submit(c->engine, ops, n, &error) != n || await(c->engine, done, n, 10000) != n)
        {
            c->failures++;
            break;
        }
        for (int i = 0; i < n; i++)
        {
            c->failures += done[i].status != GT_OK;
            const gt_op w = ops[i];
            ops[i] = signed_op(c->key, (uint64_t)i, c->peer, GT_OP_READ, in_region, w.local_offset, w.length,
                SEGMENT_ID, w.remote_offset);
        }
        memset(in, 0, at);
        if (gt_engine_submit(c->engine, ops, n, &error) != n || await(c->engine, done, n, 10000) != n)
        {
            c->failures++;
            break;
        }
        for (int i = 0; i < n; i++)
        {
            c->failures += done[i].status != GT_OK;
        }
        if (memcmp(in, out, at) != 0 || memcmp(c->node->segment + base, out, at) != 0)
        {
            c->failures++;
        }
        c->bytes += 2ull * at;
        c->rounds++;
    }
    gt_engine_unregister_memory(c->engine, out_region);
    gt_engine_unregister_memory(c->engine, in_region);
    free(out);
    free(in);
    return NULL;
}

/* One read of 100 bytes per lane of an engine with the given token key; every status must be expected. */
static int reads_on_every_lane(gt_engine *engine, const uint32_t peer, const gt_hmac_key *key, const uint32_t segment,
    const int32_t expected)
{
    enum { LANES = 4 };
    uint8_t in[LANES * 100];
    uint32_t region;
    gt_error error;
    if (gt_engine_register_memory(engine, in, sizeof(in), &region, &error) != GT_OK)
    {
        return 0;
    }
    gt_op ops[LANES];
    for (int i = 0; i < LANES; i++)
    {
        /* alone on a lane each (round-robin), sent as READs and not a vector: one per connection */
        ops[i] = signed_op(key, (uint64_t)i, peer, GT_OP_READ, region, (uint64_t)i * 100, 100, segment,
            (uint64_t)i * 4096);
    }
    gt_completion done[LANES];
    int good = gt_engine_submit(engine, ops, LANES, &error) == LANES && await(engine, done, LANES, 5000) == LANES;
    for (int i = 0; good && i < LANES; i++)
    {
        good = done[i].status == expected;
    }
    gt_engine_unregister_memory(engine, region);
    return good;
}

/*
 * A server with three event loops under four client threads of four lanes each (16 connections spread over the
 * loops), tokens on: every byte verified, one on_write upcall per WRITE frame; then a new token key and a new segment
 * table reach every connection (every loop), and a removed segment is refused on all of them.
 */
static void several_loops_serve_many_connections(void)
{
    enum { CLIENTS = 4 };
    test_node node;
    CHECK(node_start_loops(&node, 0, 3));
    CHECK(gt_server_loop_count(node.server) == 3);
    uint8_t secret[32];
    memset(secret, 0x17, sizeof(secret));
    gt_error error;
    CHECK(gt_server_set_token_key(node.server, secret, &error) == GT_OK);
    gt_hmac_key key;
    gt_hmac_key_init(&key, secret, sizeof(secret));
    loop_client clients[CLIENTS];
    pthread_t threads[CLIENTS];
    for (uint32_t i = 0; i < CLIENTS; i++)
    {
        memset(&clients[i], 0, sizeof(clients[i]));
        clients[i].node = &node;
        gt_engine_config config;
        gt_engine_config_defaults(&config);
    config.local_transfers = client_local_transfers;
        config.lanes_per_peer = 4;
        config.slice_bytes = LOOP_SLICE; /* the big pieces go in slices over several connections */
        CHECK(gt_engine_create(&config, &clients[i].engine, &error) == GT_OK);
        CHECK(clients[i].engine != NULL);
        CHECK(gt_engine_connect(clients[i].engine, "127.0.0.1", gt_server_port(node.server), &clients[i].peer,
            &error) == GT_OK);
        clients[i].index = i;
        clients[i].key = &key;
        clients[i].duration_ms = 1500;
    }
    for (uint32_t i = 0; i < CLIENTS; i++)
    {
        CHECK(pthread_create(&threads[i], NULL, loop_client_run, &clients[i]) == 0);
    }
    uint64_t rounds = 0;
    uint64_t frames = 0;
    uint64_t bytes = 0;
    int failures = 0;
    for (uint32_t i = 0; i < CLIENTS; i++)
    {
        pthread_join(threads[i], NULL);
        rounds += clients[i].rounds;
        frames += clients[i].write_frames;
        bytes += clients[i].bytes;
        failures += clients[i].failures;
    }
    printf("     loops: %llu rounds, %.1f MiB moved and verified over 16 connections and 3 loops\n",
        (unsigned long long)rounds, (double)bytes / (1 << 20));
    CHECK(failures == 0);
    CHECK(rounds >= CLIENTS);
    pthread_mutex_lock(&node.mutex);
    const int writes = node.writes;
    pthread_mutex_unlock(&node.mutex);
    CHECK((uint64_t)writes == frames); /* one ledger upcall per WRITE frame, from whichever loop served it */
    gt_server_stats stats;
    gt_server_get_stats(node.server, &stats);
    CHECK(stats.connections_opened == 4 * CLIENTS);
    CHECK(stats.protocol_errors == 0 && stats.tokens_invalid == 0);

    /* a new key: the old tokens are refused and the new ones served on every connection */
    uint8_t next_secret[32];
    memset(next_secret, 0x29, sizeof(next_secret));
    gt_hmac_key next_key;
    gt_hmac_key_init(&next_key, next_secret, sizeof(next_secret));
    CHECK(gt_server_set_token_key(node.server, next_secret, &error) == GT_OK);
    for (uint32_t i = 0; i < CLIENTS; i++)
    {
        CHECK(reads_on_every_lane(clients[i].engine, clients[i].peer, &key, SEGMENT_ID, GT_ACCESS_DENIED));
        CHECK(reads_on_every_lane(clients[i].engine, clients[i].peer, &next_key, SEGMENT_ID, GT_OK));
    }
    /* a second segment appears, then the first goes: every connection sees both changes */
    uint8_t *second = calloc(1, 1u << 20);
    CHECK(second != NULL);
    const uint32_t ids[2] = { SEGMENT_ID, 0xB0B };
    const uint64_t addresses[2] = { (uint64_t)(uintptr_t)node.segment, (uint64_t)(uintptr_t)second };
    const uint64_t sizes[2] = { SEGMENT_BYTES, 1u << 20 };
    CHECK(gt_server_set_segments(node.server, ids, addresses, sizes, 2, &error) == GT_OK);
    for (uint32_t i = 0; i < CLIENTS; i++)
    {
        CHECK(reads_on_every_lane(clients[i].engine, clients[i].peer, &next_key, 0xB0B, GT_OK));
    }
    CHECK(gt_server_set_segments(node.server, ids + 1, addresses + 1, sizes + 1, 1, &error) == GT_OK);
    for (uint32_t i = 0; i < CLIENTS; i++)
    {
        CHECK(reads_on_every_lane(clients[i].engine, clients[i].peer, &next_key, SEGMENT_ID, GT_SEGMENT_NOT_FOUND));
        CHECK(reads_on_every_lane(clients[i].engine, clients[i].peer, &next_key, 0xB0B, GT_OK));
    }
    gt_server_get_stats(node.server, &stats);
    CHECK(stats.connections_opened == 4 * CLIENTS); /* the checks above used the same 16 connections */
    for (uint32_t i = 0; i < CLIENTS; i++)
    {
        gt_engine_destroy(clients[i].engine);
    }
    node_stop(&node);
    free(second);
}

static void soak_with_mixed_sizes(void)
{
    const char *configured = getenv("GT_SOAK_SECONDS");
    const int seconds = configured != NULL ? atoi(configured) : 2;
    test_node node;
    CHECK(node_start(&node));
    uint32_t peer;
    gt_error error;
    gt_engine *engine = connected_client(&node, 256u << 10, 10000, &peer);
    CHECK(engine != NULL);
    enum { SLOTS = 32, SLOT_BYTES = 256 << 10 };
    uint8_t *out = malloc((size_t)SLOTS * SLOT_BYTES);
    uint8_t *in = malloc((size_t)SLOTS * SLOT_BYTES);
    uint32_t out_region;
    uint32_t in_region;
    CHECK(gt_engine_register_memory(engine, out, (size_t)SLOTS * SLOT_BYTES, &out_region, &error) == GT_OK);
    CHECK(gt_engine_register_memory(engine, in, (size_t)SLOTS * SLOT_BYTES, &in_region, &error) == GT_OK);
    static const uint32_t sizes[] = { 1, 100, 4096, 5000, 65536, 100000, 262144 };
    const uint64_t until = gt_now_ms() + (uint64_t)seconds * 1000u;
    uint64_t rounds = 0;
    uint64_t bytes = 0;
    while (gt_now_ms() < until)
    {
        gt_op ops[SLOTS];
        uint32_t lengths[SLOTS];
        for (int i = 0; i < SLOTS; i++)
        {
            lengths[i] = sizes[(rounds + (uint64_t)i) % (sizeof(sizes) / sizeof(sizes[0]))];
            fill_pattern(out + (size_t)i * SLOT_BYTES, lengths[i], (uint32_t)(rounds * SLOTS + (uint64_t)i));
            ops[i] = op_of((uint64_t)i, peer, GT_OP_WRITE, out_region, (uint64_t)i * SLOT_BYTES, lengths[i],
                (uint64_t)i * SLOT_BYTES);
        }
        CHECK(gt_engine_submit(engine, ops, SLOTS, &error) == SLOTS);
        gt_completion done[SLOTS];
        CHECK(await(engine, done, SLOTS, 10000) == SLOTS);
        for (int i = 0; i < SLOTS; i++)
        {
            CHECK(done[i].status == GT_OK);
            ops[i] = op_of((uint64_t)i, peer, GT_OP_READ, in_region, (uint64_t)i * SLOT_BYTES, lengths[i],
                (uint64_t)i * SLOT_BYTES);
        }
        CHECK(gt_engine_submit(engine, ops, SLOTS, &error) == SLOTS);
        CHECK(await(engine, done, SLOTS, 10000) == SLOTS);
        for (int i = 0; i < SLOTS; i++)
        {
            CHECK(done[i].status == GT_OK);
            CHECK(memcmp(in + (size_t)i * SLOT_BYTES, out + (size_t)i * SLOT_BYTES, lengths[i]) == 0);
            bytes += 2ull * lengths[i];
        }
        rounds++;
    }
    printf("     soak: %llu rounds, %.1f MiB moved and verified in %d s\n", (unsigned long long)rounds,
        (double)bytes / (1 << 20), seconds);
    CHECK(rounds > 0);
    gt_engine_destroy(engine);
    free(out);
    free(in);
    node_stop(&node);
}

int main(void)
{
    RUN(sha256_matches_fips_vectors);
    RUN(hmac_matches_rfc4231_vectors);
    RUN(sha256_implementations_agree);
    RUN(crc32c_matches_reference_and_joins);
    RUN(token_verifies_only_what_it_grants);
    RUN(header_round_trips_and_rejects_bad_frames);
    RUN(regions_resolve_only_inside_live_registrations);
    RUN(pinned_memory_is_found_only_inside_its_range);
    RUN(segment_memory_is_aligned_zeroed_and_unmapped);
    RUN(qp_info_round_trips_and_rejects_garbage);
    RUN(mr_table_finds_the_covering_registration);
    RUN(plan_splits_ops_into_signalled_chains);
    RUN(rdma_reports_why_it_is_unavailable);
    RUN(loopback_moves_every_byte);
    RUN(reads_carry_the_crc32c_of_their_bytes);
    RUN(tokens_are_checked_before_bytes_move);
    RUN(commit_follows_its_write_and_may_come_later);
    RUN(commit_token_is_checked_as_the_write_token_of_its_extent);
    RUN(write_commit_carries_its_record_in_one_frame);
    RUN(malformed_frames_close_the_connection);
    RUN(rdma_connect_is_checked_and_refused_without_a_device);
    RUN(local_connect_is_checked_and_answered);
    RUN(same_host_transfers_skip_the_socket);
    RUN(small_reads_of_one_call_move_together);
    RUN(rdma_exchange_checks_the_answer);
    RUN(rdma_moves_every_byte_over_fake_verbs);
    RUN(engine_reads_one_sided_over_fake_verbs);
    RUN(timeouts_and_admission_complete_without_answers);
    RUN(a_silent_same_host_node_holds_the_caller_briefly);
    RUN(stale_idle_connection_is_replaced_once);
    RUN(small_reads_leave_as_vectors);
    RUN(small_writes_leave_as_vectors);
    RUN(writev_frames_are_checked);
    RUN(writev_entries_reach_the_owner_in_one_call_each);
    RUN(only_big_frames_spread_over_the_lanes);
    RUN(a_call_reading_several_big_values_keeps_to_one_lane);
    RUN(vector_answers_are_checked);
    RUN(write_vector_answers_are_checked);
    RUN(sliced_write_commits_behind_its_last_unanswered_slice);
    RUN(several_loops_serve_many_connections);
    RUN(soak_with_mixed_sizes);
    printf("native: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
