/* Internal pieces shared by the transports: frame layout, SHA-256/HMAC, memory regions, errors. */
#ifndef GT_INTERNAL_H
#define GT_INTERNAL_H

#include "granary_transfer.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------- frame layout (FrameDescriptor) */

#define GT_MAGIC 0x47524E59u
#define GT_VERSION 1
#define GT_HEADER_LENGTH 64

#define GT_OPC_READ 0x01
#define GT_OPC_WRITE 0x02
#define GT_OPC_PING 0x03
#define GT_OPC_COMMIT 0x04
#define GT_OPC_RDMA_CONNECT 0x05 /* payload: a 64-byte QP-information record (gt_rdma.h) */
#define GT_OPC_WRITE_COMMIT 0x06 /* payload: a commit record of `flags` bytes, then the `length` bytes of a WRITE */
#define GT_OPC_LOCAL_CONNECT 0x07 /* no payload; the answer: a 64-byte same-host record (gt_local_info) */
#define GT_OPC_READV 0x10
#define GT_OPC_WRITEV 0x11 /* payload: a table (flags WRITE_COMMIT headers, their records: offset bytes), then the values */
#define GT_OPC_RESPONSE_BIT 0x80

#define GT_MAX_VECTOR_ENTRIES 1024
#define GT_MAX_COMMIT_PAYLOAD (16 << 10)
#define GT_MAX_WRITEV_TABLE (1u << 20) /* a WRITEV's entries and records (FrameDescriptor.MAX_WRITEV_TABLE) */
#define GT_MAX_FRAME_LENGTH_LIMIT (1u << 30)
#define GT_MAC_LENGTH 16
#define GT_KEY_LENGTH 32

#define GT_DECODE_OK 0
#define GT_DECODE_BAD_MAGIC (-1)
#define GT_DECODE_BAD_VERSION (-2)
#define GT_DECODE_BAD_OPCODE (-3)
#define GT_DECODE_BAD_LENGTH (-4)

typedef struct gt_header
{
    uint8_t opcode;
    uint16_t flags;
    uint64_t request_id;
    uint32_t segment_id;
    int32_t status;
    uint64_t offset;
    uint32_t length;
    uint32_t grant_delta;
    uint32_t grant_length;
    uint32_t token_expiry;
    uint8_t token_mac[GT_MAC_LENGTH];
} gt_header;

static inline void gt_put_u16(uint8_t *b, uint16_t v)
{
    b[0] = (uint8_t)(v >> 8);
    b[1] = (uint8_t)v;
}

static inline void gt_put_u32(uint8_t *b, uint32_t v)
{
    b[0] = (uint8_t)(v >> 24);
    b[1] = (uint8_t)(v >> 16);
    b[2] = (uint8_t)(v >> 8);
    b[3] = (uint8_t)v;
}

static inline void gt_put_u64(uint8_t *b, uint64_t v)
{
    gt_put_u32(b, (uint32_t)(v >> 32));
    gt_put_u32(b + 4, (uint32_t)v);
}

static inline uint16_t gt_get_u16(const uint8_t *b)
{
    return (uint16_t)((b[0] << 8) | b[1]);
}

static inline uint32_t gt_get_u32(const uint8_t *b)
{
    return ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | (uint32_t)b[3];
}

static inline uint64_t gt_get_u64(const uint8_t *b)
{
    return ((uint64_t)gt_get_u32(b) << 32) | gt_get_u32(b + 4);
}

int gt_opcode_is_request(int opcode);
int gt_opcode_is_response(int opcode);

/* Encodes a header (the 20 token bytes from token, or zeros when NULL) into 64 bytes. */
void gt_header_encode(uint8_t *out, const gt_header *header);

/* Decodes and validates like FrameHeader.decode: magic, version, a known opcode, length <= max_frame_length. */
int gt_header_decode(const uint8_t *in, uint32_t max_frame_length, gt_header *header);

const char *gt_decode_error_text(int result);

struct iovec;
/* A gathering, non-blocking send of count buffers (MSG_NOSIGNAL, EINTR retried): the bytes written, 0 when the
 * socket buffer is full, -1 on an error (errno set). */
long gt_sendv(int fd, struct iovec *iov, int count);

/* True when status is 0 or a known negative ErrorCode number (a client's check of a response). */
int gt_status_is_known(int32_t status);

struct sockaddr;
/* 1 when address is an IPv4 loopback address (127/8) or ::1. */
int gt_address_is_loopback(const struct sockaddr *address);
/* 1 when a and b are IPv4 or IPv6 addresses of one family with the same IP (ports aside). */
int gt_address_same_ip(const struct sockaddr *a, const struct sockaddr *b);

/* Largest payload of a request or answer of gt_control_exchange. */
#define GT_CONTROL_PAYLOAD_MAX 64

/*
 * One request and its answer over a blocking socket (the RDMA_CONNECT and LOCAL_CONNECT exchanges, which run on a
 * connection of their own): sends the header and payload_length bytes of payload, checks the answer like any response
 * (opcode, echoed request_id and segment_id, offset 0, a known status, length answer_length exactly when the status
 * is 0) and reads its answer_length payload bytes into answer. GT_OK, the node's refusal status, or
 * GT_TRANSFER_FAIL (no answer, a malformed one); error names the frame as name.
 */
int gt_control_exchange(int fd, uint8_t opcode, uint64_t request_id, uint32_t segment_id, const uint8_t *payload,
    uint32_t payload_length, uint8_t *answer, uint32_t answer_length, const char *name, gt_error *error);

/* ---------------------------------------------------------------- same-host transfers (gt_local.c) */

#define GT_LOCAL_INFO_LENGTH 64
#define GT_LOCAL_INFO_MAGIC 0x47524C43u /* "GRLC" */
#define GT_LOCAL_INFO_VERSION 1

/*
 * A node's answer to LOCAL_CONNECT (docs/protocol.md "LOCAL_CONNECT"): its process id, a random cookie and where it
 * lies in the node's memory (a client proves it can read the node's memory by reading it back), the node's table
 * generation then and where that word lies (a client checks it before every copy: a segment table change voids the
 * path), and the segment's range in the node's address space.
 */
typedef struct gt_local_info
{
    uint32_t pid;
    uint64_t cookie;
    uint64_t cookie_address;
    uint64_t generation;
    uint64_t generation_address;
    uint64_t segment_address;
    uint64_t segment_length;
} gt_local_info;

void gt_local_info_encode(uint8_t out[GT_LOCAL_INFO_LENGTH], const gt_local_info *info);
/* GT_OK, or GT_INVALID_PARAMS for another magic or version, nonzero reserved bytes, a zero pid, cookie address,
 * generation address or segment, or a segment range that wraps. */
int gt_local_info_decode(const uint8_t in[GT_LOCAL_INFO_LENGTH], gt_local_info *info);

/* The client half of the exchange on a connected blocking socket: GT_OK and the node's record for segment_id, the
 * node's refusal, or GT_TRANSFER_FAIL. */
int gt_local_exchange(int fd, uint64_t request_id, uint32_t segment_id, gt_local_info *info, gt_error *error);

/* GT_OK when process info->pid is the node that answered (its cookie reads back through process_vm_readv) and its
 * generation has not moved since; else GT_UNAVAILABLE with the reason (no permission, another process, a change). */
int gt_local_verify(const gt_local_info *info, gt_error *error);

/* The node's current table generation read from its memory: 1 and *generation, or 0 when it cannot be read. */
int gt_local_generation(const gt_local_info *info, uint64_t *generation);

/* Copies between this process and the node's segment: [offset, offset + length) of the segment to or from local.
 * GT_OK once every byte moved; GT_TRANSFER_FAIL when the kernel refused or moved fewer bytes (nothing is known
 * about the range then). */
int gt_local_copy(const gt_local_info *info, int write, uint64_t offset, uint8_t *local, uint64_t length);

/* One range of a vectored same-host copy: [offset, offset + length) of the segment and the local bytes it pairs with. */
typedef struct gt_local_range
{
    uint64_t offset;
    uint8_t *local;
    uint32_t length;
} gt_local_range;

#define GT_LOCAL_IOV_MAX 256 /* iovecs per side of one process_vm_readv here (the kernel takes up to 1024) */

/* Reads count ranges of the segment (each inside it, else GT_INVALID_PARAMS before anything moves) with as few calls
 * as the kernel allows: neighbouring ranges on either side merge into one iovec, at most GT_LOCAL_IOV_MAX per side and
 * call. GT_OK once every byte moved; GT_TRANSFER_FAIL when a call was refused or moved fewer bytes (nothing is known
 * about any of the ranges then). */
int gt_local_read_ranges(const gt_local_info *info, const gt_local_range *ranges, uint32_t count);

/* ---------------------------------------------------------------- SHA-256, HMAC, access tokens */

typedef struct gt_sha256
{
    uint32_t state[8];
    uint64_t bytes;
    uint8_t block[64];
    uint32_t fill;
} gt_sha256;

void gt_sha256_init(gt_sha256 *sha);
void gt_sha256_update(gt_sha256 *sha, const uint8_t *data, size_t length);
void gt_sha256_final(gt_sha256 *sha, uint8_t digest[32]);
/* 1 when the block compression uses the CPU's SHA extensions (SHA-NI), 0 when it runs the portable C. */
int gt_sha256_accelerated(void);
/* Tests and benchmarks: 1 forces the portable compression, 0 goes back to the best one for this CPU. */
void gt_sha256_use_portable(int portable);

/* ---------------------------------------------------------------- CRC32C (gt_crc32c.c) */

/* Bytes the update takes at full speed in one go (its interleaved chains); runs of multiples of it are best. */
#define GT_CRC32C_RUN_BYTES (12 * 1024)
/* The raw CRC32C register after bytes, from state (no inversions: a message's CRC32C is ~update(0xFFFFFFFF, m)). */
uint32_t gt_crc32c_update(uint32_t state, const uint8_t *bytes, size_t length);
/* The register state followed by `bytes` zero bytes with no inversions: state * x^(8 * bytes) mod P. */
uint32_t gt_crc32c_shift(uint32_t state, uint64_t bytes);
/* 1 when updates use the SSE4.2 crc32 instruction, 0 when they run the portable C. */
int gt_crc32c_accelerated(void);
/* Tests: 1 forces the portable update, 0 goes back to the best one for this CPU. */
void gt_crc32c_use_portable(int portable);

/* The inner and outer states of HMAC-SHA256 under one key, computed once per key. */
typedef struct gt_hmac_key
{
    gt_sha256 inner;
    gt_sha256 outer;
} gt_hmac_key;

void gt_hmac_key_init(gt_hmac_key *hmac, const uint8_t *key, size_t key_length);
void gt_hmac_sha256(const gt_hmac_key *hmac, const uint8_t *data, size_t length, uint8_t mac[32]);

/* The 32-byte MAC input of docs/protocol.md "Access tokens". */
void gt_token_message(uint8_t out[32], int opcode, uint32_t segment_id, uint64_t grant_offset, uint64_t grant_length,
    uint32_t expiry_sec);

/* 1 when mac is the token MAC of these fields under hmac (constant-time comparison). */
int gt_token_verify(const gt_hmac_key *hmac, int opcode, uint32_t segment_id, uint64_t grant_offset,
    uint64_t grant_length, uint32_t expiry_sec, const uint8_t mac[GT_MAC_LENGTH]);

/* ---------------------------------------------------------------- memory regions */

typedef struct gt_region
{
    uint8_t *address;
    uint64_t length;
    uint32_t generation;
    int used;
    void *transport; /* RDMA: the registration of the region (gt_rdma_register), made on first use; NULL on TCP */
    uint32_t transport_key; /* its lkey */
} gt_region;

typedef struct gt_region_table
{
    gt_region *regions;
    uint32_t capacity;
    uint32_t count;
    uint32_t *free_slots;
    uint32_t free_count;
} gt_region_table;

void gt_regions_init(gt_region_table *table);
void gt_regions_free(gt_region_table *table);

/* A region id: slot in the low 20 bits, a generation above, never 0. */
int gt_regions_add(gt_region_table *table, void *address, uint64_t length, uint32_t *id);
int gt_regions_remove(gt_region_table *table, uint32_t id);

/* The address of [offset, offset + length) inside region id, or NULL when the region is unknown or too short. */
uint8_t *gt_regions_resolve(const gt_region_table *table, uint32_t id, uint64_t offset, uint64_t length);
gt_region *gt_regions_get(const gt_region_table *table, uint32_t id);

/* ---------------------------------------------------------------- errors, time */

int gt_fail(gt_error *error, int code, const char *format, ...) __attribute__((format(printf, 3, 4)));
uint64_t gt_now_ms(void);
uint64_t gt_epoch_ms(void);

#endif
