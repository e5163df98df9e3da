/* The data-plane frame header, bit for bit as io.granary.protocol.FrameHeader encodes it. */
#include "gt_internal.h"

#include <errno.h>
#include <stdio.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

int gt_opcode_is_request(const int opcode)
{
    return opcode == GT_OPC_READ || opcode == GT_OPC_WRITE || opcode == GT_OPC_PING || opcode == GT_OPC_COMMIT ||
        opcode == GT_OPC_RDMA_CONNECT || opcode == GT_OPC_WRITE_COMMIT || opcode == GT_OPC_LOCAL_CONNECT ||
        opcode == GT_OPC_READV || opcode == GT_OPC_WRITEV;
}

int gt_opcode_is_response(const int opcode)
{
    return (opcode & GT_OPC_RESPONSE_BIT) != 0 && gt_opcode_is_request(opcode & ~GT_OPC_RESPONSE_BIT);
}

void gt_header_encode(uint8_t *out, const gt_header *h)
{
    gt_put_u32(out, GT_MAGIC);
    out[4] = GT_VERSION;
    out[5] = h->opcode;
    gt_put_u16(out + 6, h->flags);
    gt_put_u64(out + 8, h->request_id);
    gt_put_u32(out + 16, h->segment_id);
    gt_put_u32(out + 20, (uint32_t)h->status);
    gt_put_u64(out + 24, h->offset);
    gt_put_u32(out + 32, h->length);
    gt_put_u32(out + 36, h->grant_delta);
    gt_put_u32(out + 40, h->grant_length);
    gt_put_u32(out + 44, h->token_expiry);
    memcpy(out + 48, h->token_mac, GT_MAC_LENGTH);
}

int gt_header_decode(const uint8_t *in, const uint32_t max_frame_length, gt_header *h)
{
    h->opcode = in[5];
    h->flags = gt_get_u16(in + 6);
    h->request_id = gt_get_u64(in + 8);
    h->segment_id = gt_get_u32(in + 16);
    h->status = (int32_t)gt_get_u32(in + 20);
    h->offset = gt_get_u64(in + 24);
    h->length = gt_get_u32(in + 32);
    h->grant_delta = gt_get_u32(in + 36);
    h->grant_length = gt_get_u32(in + 40);
    h->token_expiry = gt_get_u32(in + 44);
    memcpy(h->token_mac, in + 48, GT_MAC_LENGTH);
    if (gt_get_u32(in) != GT_MAGIC)
    {
        return GT_DECODE_BAD_MAGIC;
    }
    if (in[4] != GT_VERSION)
    {
        return GT_DECODE_BAD_VERSION;
    }
    if (!gt_opcode_is_request(h->opcode) && !gt_opcode_is_response(h->opcode))
    {
        return GT_DECODE_BAD_OPCODE;
    }
    if (h->length > max_frame_length)
    {
        return GT_DECODE_BAD_LENGTH;
    }
    return GT_DECODE_OK;
}

const char *gt_decode_error_text(const int result)
{
    switch (result)
    {
        case GT_DECODE_BAD_MAGIC: return "bad magic (not a Granary transfer frame)";
        case GT_DECODE_BAD_VERSION: return "unsupported frame version";
        case GT_DECODE_BAD_OPCODE: return "unknown opcode";
        case GT_DECODE_BAD_LENGTH: return "frame length above the limit";
        default: return "ok";
    }
}

int gt_status_is_known(const int32_t status)
{
    switch (status)
    {
        case 0: case -1: case -10: case -101: case -102: case -200: case -400: case -600: case -601:
        case -703: case -704: case -705: case -706: case -707: case -800: case -801: case -900: case -901:
        case -1010: case -1700: case -1800: case -1801:
            return 1;
        default:
            return 0;
    }
}

int gt_fail(gt_error *error, const int code, const char *format, ...)
{
    if (error != NULL)
    {
        va_list args;
        va_start(args, format);
        error->code = code;
        vsnprintf(error->message, sizeof(error->message), format, args);
        va_end(args);
    }
    return code;
}

uint64_t gt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t gt_epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

long gt_sendv(int fd, struct iovec *iov, int count)
{
    struct msghdr message;
    memset(&message, 0, sizeof(message));
    message.msg_iov = iov;
    message.msg_iovlen = (size_t)count;
    for (;;)
    {
        const ssize_t written = sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (written >= 0)
        {
            return (long)written;
        }
        if (errno == EINTR)
        {
            continue;
        }
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
}

/* ---------------------------------------------------------------- control exchanges (blocking) */

static int send_all(const int fd, const uint8_t *bytes, size_t length)
{
    while (length > 0)
    {
        const ssize_t sent = send(fd, bytes, length, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR)
        {
            continue;
        }
        if (sent <= 0)
        {
            return 0;
        }
        bytes += sent;
        length -= (size_t)sent;
    }
    return 1;
}

static int receive_all(const int fd, uint8_t *bytes, size_t length)
{
    while (length > 0)
    {
        const ssize_t got = recv(fd, bytes, length, 0);
        if (got < 0 && errno == EINTR)
        {
            continue;
        }
        if (got <= 0)
        {
            return 0;
        }
        bytes += got;
        length -= (size_t)got;
    }
    return 1;
}

int gt_control_exchange(const int fd, const uint8_t opcode, const uint64_t request_id, const uint32_t segment_id,
    const uint8_t *payload, const uint32_t payload_length, uint8_t *answer, const uint32_t answer_length,
    const char *name, gt_error *error)
{
    uint8_t frame[GT_HEADER_LENGTH + GT_CONTROL_PAYLOAD_MAX];
    if (payload_length > GT_CONTROL_PAYLOAD_MAX || answer_length > GT_CONTROL_PAYLOAD_MAX)
    {
        return gt_fail(error, GT_INVALID_PARAMS, "%s payload too long", name);
    }
    gt_header h;
    memset(&h, 0, sizeof(h));
    h.opcode = opcode;
    h.request_id = request_id;
    h.segment_id = segment_id;
    h.length = payload_length;
    gt_header_encode(frame, &h);
    if (payload_length > 0)
    {
        memcpy(frame + GT_HEADER_LENGTH, payload, payload_length);
    }
    if (!send_all(fd, frame, GT_HEADER_LENGTH + (size_t)payload_length))
    {
        return gt_fail(error, GT_TRANSFER_FAIL, "cannot send the %s: %s", name, strerror(errno));
    }
    uint8_t header[GT_HEADER_LENGTH];
    if (!receive_all(fd, header, sizeof(header)))
    {
        return gt_fail(error, GT_TRANSFER_FAIL, "no answer to the %s", name);
    }
    gt_header a;
    if (gt_header_decode(header, answer_length, &a) != GT_DECODE_OK ||
        a.opcode != (opcode | GT_OPC_RESPONSE_BIT) || a.request_id != request_id ||
        a.segment_id != segment_id || a.offset != 0 || !gt_status_is_known(a.status) ||
        a.length != (a.status == GT_OK ? answer_length : 0u))
    {
        return gt_fail(error, GT_TRANSFER_FAIL, "malformed answer to the %s", name);
    }
    if (a.status != GT_OK)
    {
        return gt_fail(error, a.status, "the node refused the %s for segment %u: status %d", name, segment_id,
            a.status);
    }
    if (!receive_all(fd, answer, answer_length))
    {
        return gt_fail(error, GT_TRANSFER_FAIL, "the answer to the %s was cut short", name);
    }
    return GT_OK;
}

/* ---------------------------------------------------------------- addresses */

int gt_address_is_loopback(const struct sockaddr *address)
{
    if (address->sa_family == AF_INET)
    {
        return (ntohl(((const struct sockaddr_in *)address)->sin_addr.s_addr) >> 24) == 127;
    }
    return address->sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)address)->sin6_addr);
}

int gt_address_same_ip(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
    {
        return 0;
    }
    if (a->sa_family == AF_INET)
    {
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    }
    return a->sa_family == AF_INET6 && memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
        &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}
