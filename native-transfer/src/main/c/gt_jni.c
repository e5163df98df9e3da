/*
 * JNI glue for io.granary.transfer.natives.NativeTransferJni: the only place where the JVM meets the C library.
 * Invalid arguments come back as negative ErrorCode numbers or Java exceptions with a message, never a crash.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <jni.h>

#include "gt_internal.h"

#include <stdio.h>
#include <stdlib.h>

#define JNI_NAME(name_) Java_io_granary_transfer_natives_NativeTransferJni_##name_

/* engineSubmit's flags (NativeTransferJni.SUBMIT_*). */
#define SUBMIT_COMMIT_LATER 0x01
#define SUBMIT_CRC32C 0x02
/* Bytes of one completion record enginePoll writes (NativeTransferJni.COMPLETION_BYTES). */
#define COMPLETION_BYTES 24

#ifdef GT_TESTING
/*
 * The JNI test library (make testlib: libgranary_transfer_fake_verbs.so, never packaged) routes the RDMA transport
 * to the in-process fake verbs of src/test/c with one device from the moment it loads, so Java tests run the whole
 * RDMA flow (exchange, queue pairs, one-sided READs, fallbacks) through the real binding.
 */
#include "gt_fake_verbs.h"

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved)
{
    (void)vm;
    (void)reserved;
    fake_verbs_install(1);
    return JNI_VERSION_1_8;
}

/* io.granary.transfer.natives.FakeVerbs (src/test/java): objects alive in the fake. */
JNIEXPORT jint JNICALL Java_io_granary_transfer_natives_FakeVerbs_live(JNIEnv *env, jclass type)
{
    (void)env;
    (void)type;
    return fake_verbs_live();
}

/* io.granary.transfer.natives.FakeVerbs: memory registrations made so far. */
JNIEXPORT jint JNICALL Java_io_granary_transfer_natives_FakeVerbs_registrations(JNIEnv *env, jclass type)
{
    (void)env;
    (void)type;
    return fake_verbs_registrations();
}
#endif

static void throw_state(JNIEnv *env, const gt_error *error)
{
    char text[GT_ERROR_MESSAGE_LENGTH + 32];
    snprintf(text, sizeof(text), "%s (code %d)", error->message, error->code);
    jclass type = (*env)->FindClass(env, error->code == GT_INVALID_PARAMS ? "java/lang/IllegalArgumentException" :
        "java/lang/IllegalStateException");
    if (type != NULL)
    {
        (*env)->ThrowNew(env, type, text);
    }
}

static void *handle(const jlong value)
{
    return (void *)(uintptr_t)value;
}

JNIEXPORT jstring JNICALL JNI_NAME(version)(JNIEnv *env, jclass type)
{
    (void)type;
    return (*env)->NewStringUTF(env, gt_version());
}

JNIEXPORT jstring JNICALL JNI_NAME(rdmaUnavailabilityCause)(JNIEnv *env, jclass type)
{
    (void)type;
    gt_error error = { 0, "" };
    if (gt_rdma_available(&error))
    {
        return NULL;
    }
    return (*env)->NewStringUTF(env, error.message);
}

/* ---------------------------------------------------------------- segment memory */

/* Maps segment memory (gt_memory_map) and returns its address; throws with the library's message on failure. */
JNIEXPORT jlong JNICALL JNI_NAME(memoryMap)(JNIEnv *env, jclass type, jlong length, jboolean huge)
{
    (void)type;
    gt_error error = { 0, "" };
    void *address = NULL;
    uint64_t mapped = 0;
    if (length <= 0)
    {
        gt_fail(&error, GT_INVALID_PARAMS, "mapping length must be positive, was %lld", (long long)length);
        throw_state(env, &error);
        return 0;
    }
    if (gt_memory_map((uint64_t)length, huge == JNI_TRUE, &address, &mapped, &error) != GT_OK)
    {
        throw_state(env, &error);
        return 0;
    }
    return (jlong)(uintptr_t)address;
}

/* A direct ByteBuffer over [address, address + length) of a memoryMap mapping; throws for a bad range. */
JNIEXPORT jobject JNICALL JNI_NAME(memoryBuffer)(JNIEnv *env, jclass type, jlong address, jlong length)
{
    (void)type;
    if (address == 0 || length <= 0 || length > INT32_MAX)
    {
        gt_error error = { 0, "" };
        gt_fail(&error, GT_INVALID_PARAMS, "a buffer needs an address and a length in 1..%d, was %lld", INT32_MAX,
            (long long)length);
        throw_state(env, &error);
        return NULL;
    }
    return (*env)->NewDirectByteBuffer(env, handle(address), length);
}

/* Unmaps what memoryMap returned: 0, or GT_INVALID_PARAMS. */
JNIEXPORT jint JNICALL JNI_NAME(memoryUnmap)(JNIEnv *env, jclass type, jlong address, jlong mapped_length)
{
    (void)env;
    (void)type;
    if (mapped_length <= 0)
    {
        return GT_INVALID_PARAMS;
    }
    return gt_memory_unmap(handle(address), (uint64_t)mapped_length);
}

/* ---------------------------------------------------------------- engine */

JNIEXPORT jlong JNICALL JNI_NAME(engineCreate)(JNIEnv *env, jclass type, jint lanes, jint slice_bytes,
    jint max_queued, jint max_pending, jlong admission_timeout_ms, jlong transfer_timeout_ms,
    jlong connect_timeout_ms, jint max_vector_entries, jboolean rdma_reads, jint spread_min_bytes,
    jboolean write_commits, jboolean local_transfers, jint local_min_bytes)
{
    (void)type;
    gt_engine_config config;
    gt_error error = { 0, "" };
    gt_engine *engine = NULL;
    if (lanes < 1 || slice_bytes < 1 || max_queued < 1 || max_pending < 0 || admission_timeout_ms < 1 ||
        transfer_timeout_ms < 1 || connect_timeout_ms < 1 || max_vector_entries < 1 || spread_min_bytes < 0 || local_min_bytes < 1)
    {
        gt_fail(&error, GT_INVALID_PARAMS, "engine settings must be positive");
        throw_state(env, &error);
        return 0;
    }
    gt_engine_config_defaults(&config);
    config.lanes_per_peer = (uint32_t)lanes;
    config.slice_bytes = (uint32_t)slice_bytes;
    config.max_queued_frames_per_peer = (uint32_t)max_queued;
    config.max_pending_per_peer = (uint32_t)max_pending;
    config.admission_timeout_ms = (uint64_t)admission_timeout_ms;
    config.transfer_timeout_ms = (uint64_t)transfer_timeout_ms;
    config.connect_timeout_ms = (uint64_t)connect_timeout_ms;
    config.max_vector_entries = (uint32_t)max_vector_entries;
    config.rdma_reads = rdma_reads ? 1 : 0;
    config.spread_min_bytes = (uint32_t)spread_min_bytes;
    config.write_commits = write_commits ? 1 : 0;
    config.local_transfers = local_transfers ? 1 : 0;
    config.local_min_bytes = (uint32_t)local_min_bytes;
    if (gt_engine_create(&config, &engine, &error) != GT_OK)
    {
        throw_state(env, &error);
        return 0;
    }
    return (jlong)(uintptr_t)engine;
}

JNIEXPORT jint JNICALL JNI_NAME(engineConnect)(JNIEnv *env, jclass type, jlong engine, jstring host, jint port)
{
    (void)type;
    if (engine == 0 || host == NULL || port < 1 || port > 65535)
    {
        return GT_INVALID_PARAMS;
    }
    const char *text = (*env)->GetStringUTFChars(env, host, NULL);
    if (text == NULL)
    {
        return GT_INTERNAL_ERROR;
    }
    uint32_t peer = 0;
    gt_error error = { 0, "" };
    const int result = gt_engine_connect(handle(engine), text, (uint16_t)port, &peer, &error);
    (*env)->ReleaseStringUTFChars(env, host, text);
    return result == GT_OK ? (jint)peer : result;
}

static int copy_array(JNIEnv *env, jbyteArray array, uint8_t *into, const jsize length)
{
    if (array == NULL || (*env)->GetArrayLength(env, array) != length)
    {
        return 0;
    }
    (*env)->GetByteArrayRegion(env, array, 0, length, (jbyte *)into);
    return 1;
}

JNIEXPORT jint JNICALL JNI_NAME(engineSubmit)(JNIEnv *env, jclass type, jlong engine, jlong user_data, jint peer,
    jint opcode, jobject local, jint position, jint length, jint segment_id, jlong remote_offset,
    jlong grant_offset, jlong grant_length, jbyteArray token, jbyteArray commit, jint flags)
{
    (void)type;
    if (engine == 0 || length < 0 || position < 0 || remote_offset < 0 || (length > 0 && local == NULL))
    {
        return GT_INVALID_PARAMS;
    }
    uint8_t *local_address = NULL;
    if (length > 0)
    {
        /* Only a direct buffer has an address; the range must lie inside its capacity. */
        local_address = (*env)->GetDirectBufferAddress(env, local);
        const jlong capacity = (*env)->GetDirectBufferCapacity(env, local);
        if (local_address == NULL || capacity < 0 || (jlong)position + (jlong)length > capacity)
        {
            return GT_INVALID_PARAMS;
        }
        local_address += position;
    }
    gt_engine *e = handle(engine);
    gt_op op;
    memset(&op, 0, sizeof(op));
    op.user_data = (uint64_t)user_data;
    op.peer = (uint32_t)peer;
    op.opcode = (uint8_t)opcode;
    op.length = (uint32_t)length;
    op.segment_id = (uint32_t)segment_id;
    op.remote_offset = (uint64_t)remote_offset;
    op.grant_offset = grant_offset < 0 ? UINT64_MAX : (uint64_t)grant_offset;
    op.grant_length = grant_length < 0 ? 0 : (uint64_t)grant_length;
    if (token != NULL)
    {
        if (!copy_array(env, token, op.token, GT_TOKEN_LENGTH))
        {
            return GT_INVALID_PARAMS;
        }
        op.has_token = 1;
    }
    else
    {
        /* without a token the grant fields are not sent; any grant holding the range will do */
        op.grant_offset = op.remote_offset;
        op.grant_length = op.length;
    }
    /* A COMMIT record (~100 bytes) is read onto the stack; gt_engine_submit copies it into the transfer. */
    uint8_t commit_stack[512];
    uint8_t *commit_bytes = NULL;
    if (commit != NULL)
    {
        const jsize commit_length = (*env)->GetArrayLength(env, commit);
        commit_bytes = commit_length <= (jsize)sizeof(commit_stack) ? commit_stack :
            malloc((size_t)commit_length);
        if (commit_bytes == NULL)
        {
            return GT_INTERNAL_ERROR;
        }
        (*env)->GetByteArrayRegion(env, commit, 0, commit_length, (jbyte *)commit_bytes);
        op.commit = commit_bytes;
        op.commit_length = (uint32_t)commit_length;
        if (commit_length == 0)
        {
            op.commit = NULL;
        }
    }
    if (flags & SUBMIT_COMMIT_LATER)
    {
        op.flags |= GT_OP_FLAG_COMMIT_LATER;
    }
    if (flags & SUBMIT_CRC32C)
    {
        op.flags |= GT_OP_FLAG_CRC32C;
    }
    gt_error error = { 0, "" };
    if (length > 0 && !gt_engine_find_pinned(e, local_address, (uint64_t)length, &op.region, &op.local_offset))
    {
        /* The caller's memory, registered for this operation alone and released when it completes. */
        if (gt_engine_register_memory(e, local_address, (uint64_t)length, &op.region, &error) !=
            GT_OK)
        {
            if (commit_bytes != commit_stack)
            {
                free(commit_bytes);
            }
            return error.code;
        }
        op.flags |= GT_OP_FLAG_RELEASE_REGION;
    }
    const int result = gt_engine_submit(e, &op, 1, &error);
    if (commit_bytes != commit_stack)
    {
        free(commit_bytes);
    }
    if (result < 0)
    {
        if (op.flags & GT_OP_FLAG_RELEASE_REGION)
        {
            gt_engine_unregister_memory(e, op.region);
        }
        return result;
    }
    return GT_OK;
}

/* Pins a direct buffer's whole capacity (gt_engine_pin_memory): 0, or a negative ErrorCode number. */
JNIEXPORT jint JNICALL JNI_NAME(enginePinMemory)(JNIEnv *env, jclass type, jlong engine, jobject buffer)
{
    (void)type;
    uint8_t *address = buffer == NULL ? NULL : (*env)->GetDirectBufferAddress(env, buffer);
    const jlong capacity = buffer == NULL ? -1 : (*env)->GetDirectBufferCapacity(env, buffer);
    if (engine == 0 || address == NULL || capacity <= 0)
    {
        return GT_INVALID_PARAMS;
    }
    uint32_t region = 0;
    gt_error error = { 0, "" };
    return gt_engine_pin_memory(handle(engine), address, (uint64_t)capacity, &region, &error);
}

/* Forgets a pinned buffer: 0, or GT_INVALID_PARAMS when it was not pinned. */
JNIEXPORT jint JNICALL JNI_NAME(engineUnpinMemory)(JNIEnv *env, jclass type, jlong engine, jobject buffer)
{
    (void)type;
    uint8_t *address = buffer == NULL ? NULL : (*env)->GetDirectBufferAddress(env, buffer);
    if (engine == 0 || address == NULL)
    {
        return GT_INVALID_PARAMS;
    }
    return gt_engine_unpin_memory(handle(engine), address);
}

JNIEXPORT jint JNICALL JNI_NAME(engineProvideCommit)(JNIEnv *env, jclass type, jlong engine, jlong user_data,
    jbyteArray commit)
{
    (void)type;
    if (engine == 0)
    {
        return GT_INVALID_PARAMS;
    }
    uint8_t *bytes = NULL;
    jsize length = 0;
    if (commit != NULL)
    {
        length = (*env)->GetArrayLength(env, commit);
        bytes = malloc(length > 0 ? (size_t)length : 1);
        if (bytes == NULL)
        {
            return GT_INTERNAL_ERROR;
        }
        (*env)->GetByteArrayRegion(env, commit, 0, length, (jbyte *)bytes);
    }
    gt_error error = { 0, "" };
    const int result = gt_engine_provide_commit(handle(engine), (uint64_t)user_data, length > 0 ? bytes : NULL,
        (uint32_t)length, &error);
    free(bytes);
    return result;
}

JNIEXPORT jint JNICALL JNI_NAME(enginePoll)(JNIEnv *env, jclass type, jlong engine, jobject completions, jint max,
    jint timeout_ms)
{
    (void)type;
    if (engine == 0 || completions == NULL || max < 1)
    {
        return GT_INVALID_PARAMS;
    }
    uint8_t *out = (*env)->GetDirectBufferAddress(env, completions);
    const jlong capacity = (*env)->GetDirectBufferCapacity(env, completions);
    if (out == NULL || capacity < (jlong)max * COMPLETION_BYTES)
    {
        return GT_INVALID_PARAMS;
    }
    gt_completion batch[256];
    const int want = max < 256 ? max : 256;
    const int n = gt_engine_poll(handle(engine), batch, want, timeout_ms);
    for (int i = 0; i < n; i++)
    {
        /* COMPLETION_BYTES each in native order: user data, status, has_crc32c (0/1), crc32c, 4 bytes of padding */
        uint8_t *record = out + (size_t)i * COMPLETION_BYTES;
        memcpy(record, &batch[i].user_data, 8);
        memcpy(record + 8, &batch[i].status, 4);
        memcpy(record + 12, &batch[i].has_crc32c, 4);
        memcpy(record + 16, &batch[i].crc32c, 4);
        memset(record + 20, 0, 4);
    }
    return n;
}

JNIEXPORT void JNICALL JNI_NAME(engineWakeup)(JNIEnv *env, jclass type, jlong engine)
{
    (void)env;
    (void)type;
    if (engine != 0)
    {
        gt_engine_wakeup(handle(engine));
    }
}

JNIEXPORT jlong JNICALL JNI_NAME(enginePeerStats)(JNIEnv *env, jclass type, jlong engine, jint peer)
{
    (void)env;
    (void)type;
    uint32_t outstanding = 0;
    uint32_t pending = 0;
    if (engine == 0 || gt_engine_peer_stats(handle(engine), (uint32_t)peer, &outstanding, &pending) != GT_OK)
    {
        return -1;
    }
    return ((jlong)outstanding << 32) | pending;
}

JNIEXPORT void JNICALL JNI_NAME(engineCounters)(JNIEnv *env, jclass type, jlong engine, jlongArray out)
{
    (void)type;
    if (engine == 0 || out == NULL || (*env)->GetArrayLength(env, out) < 3)
    {
        return;
    }
    uint64_t values[9];
    gt_engine_counters(handle(engine), &values[0], &values[1], &values[2]);
    values[3] = gt_engine_region_count(handle(engine));
    gt_engine_rdma_counters(handle(engine), &values[4], &values[5]);
    gt_engine_local_counters(handle(engine), &values[6], &values[7], &values[8]);
    const jsize length = (*env)->GetArrayLength(env, out);
    (*env)->SetLongArrayRegion(env, out, 0, length < 9 ? length : 9, (const jlong *)values);
}

JNIEXPORT void JNICALL JNI_NAME(engineDestroy)(JNIEnv *env, jclass type, jlong engine)
{
    (void)env;
    (void)type;
    if (engine != 0)
    {
        gt_engine_destroy(handle(engine));
    }
}

/* ---------------------------------------------------------------- server */

typedef struct server_context
{
    JNIEnv *env;
    jobject handler;
    jmethodID on_write;
    jmethodID on_commit;
    jmethodID on_close;
    jmethodID epoch_millis;
    jmethodID on_latencies;
    jmethodID on_write_vector;
    jmethodID on_commit_vector;
    /* the loop's scratch memory for a WRITEV's entries, and a direct ByteBuffer over it (a global reference) */
    uint8_t *scratch;
    size_t scratch_capacity;
    jobject scratch_buffer;
} server_context;

static int java_failed(JNIEnv *env)
{
    if ((*env)->ExceptionCheck(env))
    {
        (*env)->ExceptionClear(env);
        return 1;
    }
    return 0;
}

static int on_write(void *context, const uint32_t segment_id, const uint64_t offset, const uint32_t length)
{
    server_context *c = context;
    const jint status = (*c->env)->CallIntMethod(c->env, c->handler, c->on_write, (jint)segment_id, (jlong)offset,
        (jint)length);
    return java_failed(c->env) ? GT_INTERNAL_ERROR : status;
}

static int on_commit(void *context, const uint8_t *header, const uint8_t *payload, const uint32_t length,
    const int failed_write_status, const int token_status)
{
    server_context *c = context;
    JNIEnv *env = c->env;
    jbyteArray header_array = (*env)->NewByteArray(env, GT_HEADER_LENGTH);
    jbyteArray payload_array = payload == NULL ? NULL : (*env)->NewByteArray(env, (jsize)length);
    if (header_array == NULL || (payload != NULL && payload_array == NULL))
    {
        java_failed(env);
        return GT_INTERNAL_ERROR;
    }
    (*env)->SetByteArrayRegion(env, header_array, 0, GT_HEADER_LENGTH, (const jbyte *)header);
    if (payload_array != NULL)
    {
        (*env)->SetByteArrayRegion(env, payload_array, 0, (jsize)length, (const jbyte *)payload);
    }
    const jint status = (*env)->CallIntMethod(env, c->handler, c->on_commit, header_array, payload_array,
        (jint)failed_write_status, (jint)token_status);
    const int failed = java_failed(env);
    (*env)->DeleteLocalRef(env, header_array);
    if (payload_array != NULL)
    {
        (*env)->DeleteLocalRef(env, payload_array);
    }
    return failed ? GT_INTERNAL_ERROR : status;
}

/* The loop's scratch buffer with room for `need` bytes (a new direct ByteBuffer when it grows), or NULL. */
static jobject scratch_for(server_context *c, const size_t need)
{
    JNIEnv *env = c->env;
    if (c->scratch_buffer != NULL && c->scratch_capacity >= need)
    {
        return c->scratch_buffer;
    }
    size_t capacity = c->scratch_capacity == 0 ? 64u << 10 : c->scratch_capacity;
    while (capacity < need)
    {
        capacity *= 2;
    }
    if (c->scratch_buffer != NULL)
    {
        (*env)->DeleteGlobalRef(env, c->scratch_buffer);
        c->scratch_buffer = NULL;
    }
    free(c->scratch);
    c->scratch_capacity = 0;
    c->scratch = malloc(capacity);
    if (c->scratch == NULL)
    {
        return NULL;
    }
    jobject local = (*env)->NewDirectByteBuffer(env, c->scratch, (jlong)capacity);
    c->scratch_buffer = local == NULL ? NULL : (*env)->NewGlobalRef(env, local);
    if (local != NULL)
    {
        (*env)->DeleteLocalRef(env, local);
    }
    if (c->scratch_buffer == NULL)
    {
        java_failed(env);
        free(c->scratch);
        c->scratch = NULL;
        return NULL;
    }
    c->scratch_capacity = capacity;
    return c->scratch_buffer;
}

/*
 * A WRITEV's WRITE parts in one call (NativeTransferServer.Handler.onWriteVector): count entries of 16 bytes
 * (big-endian segment id, length, offset), then the count statuses Java writes.
 */
static void on_writes(void *context, const uint32_t count, const uint32_t *segment_ids, const uint64_t *offsets,
    const uint32_t *lengths, int32_t *statuses)
{
    server_context *c = context;
    jobject buffer = scratch_for(c, (size_t)count * 20u);
    if (buffer == NULL)
    {
        for (uint32_t i = 0; i < count; i++)
        {
            statuses[i] = on_write(c, segment_ids[i], offsets[i], lengths[i]);
        }
        return;
    }
    for (uint32_t i = 0; i < count; i++)
    {
        uint8_t *entry = c->scratch + (size_t)i * 16u;
        gt_put_u32(entry, segment_ids[i]);
        gt_put_u32(entry + 4, lengths[i]);
        gt_put_u64(entry + 8, offsets[i]);
        gt_put_u32(c->scratch + (size_t)count * 16u + (size_t)i * 4u, (uint32_t)GT_INTERNAL_ERROR);
    }
    (*c->env)->CallVoidMethod(c->env, c->handler, c->on_write_vector, buffer, (jint)count);
    const int failed = java_failed(c->env);
    for (uint32_t i = 0; i < count; i++)
    {
        statuses[i] = failed ? GT_INTERNAL_ERROR :
            (int32_t)gt_get_u32(c->scratch + (size_t)count * 16u + (size_t)i * 4u);
    }
}

/*
 * A WRITEV's COMMITs in one call (NativeTransferServer.Handler.onCommitVector): count statuses Java writes, then per
 * entry its 64-byte COMMIT header, its token status, its record's length (big-endian int32 each) and the record.
 */
static void on_commits(void *context, const uint32_t count, const uint8_t *headers, const uint8_t *const *records,
    const uint32_t *record_lengths, const int32_t *token_statuses, int32_t *statuses)
{
    server_context *c = context;
    size_t need = (size_t)count * 4u;
    for (uint32_t i = 0; i < count; i++)
    {
        need += GT_HEADER_LENGTH + 8u + record_lengths[i];
    }
    jobject buffer = scratch_for(c, need);
    if (buffer == NULL)
    {
        for (uint32_t i = 0; i < count; i++)
        {
            statuses[i] = on_commit(c, headers + (size_t)i * GT_HEADER_LENGTH, records[i], record_lengths[i], 0,
                token_statuses[i]);
        }
        return;
    }
    size_t at = (size_t)count * 4u;
    for (uint32_t i = 0; i < count; i++)
    {
        gt_put_u32(c->scratch + (size_t)i * 4u, (uint32_t)GT_INTERNAL_ERROR);
        memcpy(c->scratch + at, headers + (size_t)i * GT_HEADER_LENGTH, GT_HEADER_LENGTH);
        gt_put_u32(c->scratch + at + GT_HEADER_LENGTH, (uint32_t)token_statuses[i]);
        gt_put_u32(c->scratch + at + GT_HEADER_LENGTH + 4, record_lengths[i]);
        memcpy(c->scratch + at + GT_HEADER_LENGTH + 8, records[i], record_lengths[i]);
        at += GT_HEADER_LENGTH + 8u + record_lengths[i];
    }
    (*c->env)->CallVoidMethod(c->env, c->handler, c->on_commit_vector, buffer, (jint)count);
    const int failed = java_failed(c->env);
    for (uint32_t i = 0; i < count; i++)
    {
        statuses[i] = failed ? GT_INTERNAL_ERROR : (int32_t)gt_get_u32(c->scratch + (size_t)i * 4u);
    }
}

static void on_close(void *context, const char *peer, const char *reason)
{
    server_context *c = context;
    JNIEnv *env = c->env;
    jstring peer_text = (*env)->NewStringUTF(env, peer);
    jstring reason_text = reason == NULL ? NULL : (*env)->NewStringUTF(env, reason);
    (*env)->CallVoidMethod(env, c->handler, c->on_close, peer_text, reason_text);
    java_failed(env);
    (*env)->DeleteLocalRef(env, peer_text);
    if (reason_text != NULL)
    {
        (*env)->DeleteLocalRef(env, reason_text);
    }
}

static uint64_t now_epoch_ms(void *context)
{
    server_context *c = context;
    const jlong now = (*c->env)->CallLongMethod(c->env, c->handler, c->epoch_millis);
    return java_failed(c->env) || now < 0 ? gt_epoch_ms() : (uint64_t)now;
}

static void on_latencies(void *context, const uint64_t *samples, const int count)
{
    server_context *c = context;
    JNIEnv *env = c->env;
    jlongArray array = (*env)->NewLongArray(env, count);
    if (array == NULL)
    {
        java_failed(env);
        return;
    }
    (*env)->SetLongArrayRegion(env, array, 0, count, (const jlong *)samples);
    (*env)->CallVoidMethod(env, c->handler, c->on_latencies, array);
    java_failed(env);
    (*env)->DeleteLocalRef(env, array);
}

/*
 * The callbacks reach the handler of the serverRun call running on the calling thread: every event loop runs on a
 * Java thread of its own (its JNIEnv, its handler), and a loop calls back only on its own thread, between the start
 * and the end of its run.
 */
typedef struct server_holder
{
    gt_server *server;
} server_holder;

static __thread server_context *loop_context;

static int holder_on_write(void *context, uint32_t segment_id, uint64_t offset, uint32_t length)
{
    (void)context;
    return loop_context == NULL ? GT_INTERNAL_ERROR : on_write(loop_context, segment_id, offset, length);
}

static int holder_on_commit(void *context, const uint8_t *header, const uint8_t *payload, uint32_t length,
    int failed_write_status, int token_status)
{
    (void)context;
    return loop_context == NULL ? GT_INTERNAL_ERROR :
        on_commit(loop_context, header, payload, length, failed_write_status, token_status);
}

static uint64_t holder_now_epoch_ms(void *context)
{
    (void)context;
    return loop_context == NULL ? gt_epoch_ms() : now_epoch_ms(loop_context);
}

static void holder_on_latencies(void *context, const uint64_t *samples, int count)
{
    (void)context;
    if (loop_context != NULL)
    {
        on_latencies(loop_context, samples, count);
    }
}

static void holder_on_writes(void *context, const uint32_t count, const uint32_t *segment_ids,
    const uint64_t *offsets, const uint32_t *lengths, int32_t *statuses)
{
    (void)context;
    if (loop_context == NULL)
    {
        for (uint32_t i = 0; i < count; i++)
        {
            statuses[i] = GT_INTERNAL_ERROR;
        }
        return;
    }
    on_writes(loop_context, count, segment_ids, offsets, lengths, statuses);
}

static void holder_on_commits(void *context, const uint32_t count, const uint8_t *headers,
    const uint8_t *const *records, const uint32_t *record_lengths, const int32_t *token_statuses, int32_t *statuses)
{
    (void)context;
    if (loop_context == NULL)
    {
        for (uint32_t i = 0; i < count; i++)
        {
            statuses[i] = GT_INTERNAL_ERROR;
        }
        return;
    }
    on_commits(loop_context, count, headers, records, record_lengths, token_statuses, statuses);
}

static void holder_on_close(void *context, const char *peer, const char *reason)
{
    (void)context;
    if (loop_context != NULL)
    {
        on_close(loop_context, peer, reason);
    }
}

JNIEXPORT jlong JNICALL JNI_NAME(serverCreate)(JNIEnv *env, jclass type, jstring host, jint port,
    jint max_frame_bytes, jboolean own_clock, jint io_threads, jboolean local_transfers)
{
    (void)type;
    gt_error error = { 0, "" };
    if (port < 0 || port > 65535 || max_frame_bytes < 1 || io_threads < 1)
    {
        gt_fail(&error, GT_INVALID_PARAMS, "port must be in 0..65535, max_frame_bytes and io_threads positive");
        throw_state(env, &error);
        return 0;
    }
    server_holder *holder = calloc(1, sizeof(server_holder));
    if (holder == NULL)
    {
        gt_fail(&error, GT_INTERNAL_ERROR, "out of memory");
        throw_state(env, &error);
        return 0;
    }
    const char *text = host == NULL ? NULL : (*env)->GetStringUTFChars(env, host, NULL);
    gt_server_config config = { .host = text, .port = (uint16_t)port, .max_frame_bytes = (uint32_t)max_frame_bytes,
        .io_threads = (uint32_t)io_threads, .local_transfers = local_transfers ? 1 : 0 };
    gt_server_callbacks callbacks = { .context = holder, .on_write = holder_on_write,
        .on_commit = holder_on_commit, .on_close = holder_on_close, .on_latencies = holder_on_latencies,
        .on_writes = holder_on_writes, .on_commits = holder_on_commits,
        .now_epoch_ms = own_clock ? holder_now_epoch_ms : NULL };
    const int result = gt_server_create(&config, &callbacks, &holder->server, &error);
    if (text != NULL)
    {
        (*env)->ReleaseStringUTFChars(env, host, text);
    }
    if (result != GT_OK)
    {
        free(holder);
        throw_state(env, &error);
        return 0;
    }
    return (jlong)(uintptr_t)holder;
}

JNIEXPORT jint JNICALL JNI_NAME(serverPort)(JNIEnv *env, jclass type, jlong server)
{
    (void)env;
    (void)type;
    return server == 0 ? -1 : gt_server_port(((server_holder *)handle(server))->server);
}

JNIEXPORT void JNICALL JNI_NAME(serverSetSegments)(JNIEnv *env, jclass type, jlong server, jintArray ids,
    jlongArray addresses, jlongArray sizes)
{
    (void)type;
    gt_error error = { 0, "" };
    const jsize n = ids == NULL ? -1 : (*env)->GetArrayLength(env, ids);
    if (server == 0 || n < 0 || addresses == NULL || sizes == NULL || (*env)->GetArrayLength(env, addresses) != n ||
        (*env)->GetArrayLength(env, sizes) != n)
    {
        gt_fail(&error, GT_INVALID_PARAMS, "ids, addresses and sizes must have the same length");
        throw_state(env, &error);
        return;
    }
    uint32_t *id_values = calloc((size_t)n + 1, sizeof(uint32_t));
    uint64_t *address_values = calloc((size_t)n + 1, sizeof(uint64_t));
    uint64_t *size_values = calloc((size_t)n + 1, sizeof(uint64_t));
    if (id_values != NULL && address_values != NULL && size_values != NULL)
    {
        (*env)->GetIntArrayRegion(env, ids, 0, n, (jint *)id_values);
        (*env)->GetLongArrayRegion(env, addresses, 0, n, (jlong *)address_values);
        (*env)->GetLongArrayRegion(env, sizes, 0, n, (jlong *)size_values);
        if (gt_server_set_segments(((server_holder *)handle(server))->server, id_values, address_values,
            size_values, (int)n, &error) != GT_OK)
        {
            throw_state(env, &error);
        }
    }
    else
    {
        gt_fail(&error, GT_INTERNAL_ERROR, "out of memory");
        throw_state(env, &error);
    }
    free(id_values);
    free(address_values);
    free(size_values);
}

JNIEXPORT void JNICALL JNI_NAME(serverSetTokenKey)(JNIEnv *env, jclass type, jlong server, jbyteArray key)
{
    (void)type;
    gt_error error = { 0, "" };
    if (server == 0)
    {
        return;
    }
    gt_server *s = ((server_holder *)handle(server))->server;
    if (key == NULL)
    {
        gt_server_set_token_key(s, NULL, &error);
        return;
    }
    uint8_t bytes[GT_KEY_LENGTH];
    if (!copy_array(env, key, bytes, GT_KEY_LENGTH))
    {
        gt_fail(&error, GT_INVALID_PARAMS, "a data-token key has %d bytes", GT_KEY_LENGTH);
        throw_state(env, &error);
        return;
    }
    gt_server_set_token_key(s, bytes, &error);
    memset(bytes, 0, sizeof(bytes));
}

JNIEXPORT jint JNICALL JNI_NAME(serverRun)(JNIEnv *env, jclass type, jlong server, jint loop, jobject handler)
{
    (void)type;
    if (server == 0 || handler == NULL || loop < 0)
    {
        return GT_INVALID_PARAMS;
    }
    server_holder *holder = handle(server);
    jclass handler_type = (*env)->GetObjectClass(env, handler);
    server_context context;
    memset(&context, 0, sizeof(context));
    context.env = env;
    context.handler = handler;
    context.on_write = (*env)->GetMethodID(env, handler_type, "onWrite", "(IJI)I");
    context.on_commit = (*env)->GetMethodID(env, handler_type, "onCommit", "([B[BII)I");
    context.on_close = (*env)->GetMethodID(env, handler_type, "onClose", "(Ljava/lang/String;Ljava/lang/String;)V");
    context.epoch_millis = (*env)->GetMethodID(env, handler_type, "epochMillis", "()J");
    context.on_latencies = (*env)->GetMethodID(env, handler_type, "onLatencies", "([J)V");
    context.on_write_vector = (*env)->GetMethodID(env, handler_type, "onWriteVector", "(Ljava/nio/ByteBuffer;I)V");
    context.on_commit_vector = (*env)->GetMethodID(env, handler_type, "onCommitVector", "(Ljava/nio/ByteBuffer;I)V");
    if (context.on_write == NULL || context.on_commit == NULL || context.on_close == NULL ||
        context.epoch_millis == NULL || context.on_latencies == NULL || context.on_write_vector == NULL ||
        context.on_commit_vector == NULL)
    {
        return GT_INVALID_PARAMS; /* NoSuchMethodError is pending for the caller */
    }
    loop_context = &context;
    gt_error error = { 0, "" };
    const int result = gt_server_run_loop(holder->server, (uint32_t)loop, &error);
    loop_context = NULL;
    if (context.scratch_buffer != NULL)
    {
        (*env)->DeleteGlobalRef(env, context.scratch_buffer);
    }
    free(context.scratch);
    return result;
}

JNIEXPORT void JNICALL JNI_NAME(serverStop)(JNIEnv *env, jclass type, jlong server)
{
    (void)env;
    (void)type;
    if (server != 0)
    {
        gt_server_stop(((server_holder *)handle(server))->server);
    }
}

JNIEXPORT void JNICALL JNI_NAME(serverStats)(JNIEnv *env, jclass type, jlong server, jlongArray out)
{
    (void)type;
    if (server == 0 || out == NULL)
    {
        return;
    }
    gt_server_stats stats;
    gt_server_get_stats(((server_holder *)handle(server))->server, &stats);
    const jsize n = (jsize)(sizeof(stats) / sizeof(uint64_t));
    const jsize length = (*env)->GetArrayLength(env, out);
    (*env)->SetLongArrayRegion(env, out, 0, length < n ? length : n, (const jlong *)&stats);
}

JNIEXPORT void JNICALL JNI_NAME(serverDestroy)(JNIEnv *env, jclass type, jlong server)
{
    (void)env;
    (void)type;
    if (server != 0)
    {
        server_holder *holder = handle(server);
        gt_server_destroy(holder->server);
        free(holder);
    }
}
