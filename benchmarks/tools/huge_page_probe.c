/*
 * What transparent huge pages change for a storage node's segment, without Granary in the way: a region of GIB
 * gibibytes is mapped (2 MiB aligned) with 4 KiB pages or with MADV_HUGEPAGE, touched page by page (the cost of
 * --pre-touch or of first writes), then one loopback TCP connection moves 1 MiB values into random 1 MiB slots of it
 * (a node receiving WRITEs) and out of random slots (a node answering READs), each value acknowledged by one byte.
 * The same moves into and out of one reused 1 MiB buffer are the loopback limit of this run.
 *
 *   gcc -O2 -pthread -o /tmp/huge_page_probe benchmarks/tools/huge_page_probe.c && /tmp/huge_page_probe 6
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define VALUE (1u << 20)
#define HUGE (2ul << 20)
#define MOVES 4000

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

typedef struct
{
    int fd;
    unsigned char *region; /* NULL: one reused buffer */
    size_t slots;
    int sending;           /* 1: this side sends values, the other acknowledges */
} side;

static unsigned char *slot(const side *s, unsigned *seed, unsigned char *own)
{
    return s->region == NULL ? own : s->region + ((size_t)rand_r(seed) % s->slots) * VALUE;
}

static void *run(void *arg)
{
    const side *s = arg;
    unsigned seed = 7;
    unsigned char *own = malloc(VALUE);
    memset(own, 1, VALUE);
    for (int i = 0; i < MOVES; i++)
    {
        unsigned char ack = 0;
        unsigned char *at = slot(s, &seed, own);
        if (s->sending)
        {
            for (size_t done = 0; done < VALUE;)
            {
                const ssize_t n = send(s->fd, at + done, VALUE - done, 0);
                if (n <= 0) { perror("send"); exit(1); }
                done += (size_t)n;
            }
            if (recv(s->fd, &ack, 1, MSG_WAITALL) != 1) { perror("recv ack"); exit(1); }
        }
        else
        {
            if (recv(s->fd, at, VALUE, MSG_WAITALL) != (ssize_t)VALUE) { perror("recv"); exit(1); }
            if (send(s->fd, &ack, 1, 0) != 1) { perror("send ack"); exit(1); }
        }
    }
    free(own);
    return NULL;
}

/* GB/s of MOVES values from `from` to `to` over a fresh loopback connection. */
static double move(unsigned char *from_region, unsigned char *to_region, size_t slots)
{
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t length = sizeof(address);
    if (bind(listener, (struct sockaddr *)&address, length) != 0 || listen(listener, 1) != 0 ||
        getsockname(listener, (struct sockaddr *)&address, &length) != 0) { perror("listen"); exit(1); }
    int client = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(client, (struct sockaddr *)&address, length) != 0) { perror("connect"); exit(1); }
    int server = accept(listener, NULL, NULL);
    side sender = { client, from_region, slots, 1 };
    side receiver = { server, to_region, slots, 0 };
    pthread_t thread;
    const double start = now();
    pthread_create(&thread, NULL, run, &sender);
    run(&receiver);
    pthread_join(thread, NULL);
    const double seconds = now() - start;
    close(client);
    close(server);
    close(listener);
    return (double)MOVES * VALUE / seconds / 1e9;
}

int main(int argc, char **argv)
{
    const size_t bytes = (size_t)(argc > 1 ? atol(argv[1]) : 4) << 30;
    printf("region %zu GiB, %d moves of 1 MiB per figure\n", bytes >> 30, MOVES);
    printf("loopback limit (one reused buffer each side): %.2f GB/s\n", move(NULL, NULL, 0));
    for (int huge = 0; huge <= 1; huge++)
    {
        unsigned char *raw = mmap(NULL, bytes + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED) { perror("mmap"); return 1; }
        unsigned char *region = (unsigned char *)(((uintptr_t)raw + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
        if (huge && madvise(region, bytes, MADV_HUGEPAGE) != 0) { perror("madvise"); return 1; }
        double start = now();
        for (size_t offset = 0; offset < bytes; offset += 4096)
        {
            region[offset] = 1;
        }
        const double touch = now() - start;
        const char *pages = huge ? "huge pages" : "4 KiB pages";
        printf("%-11s first touch: %.2f GB/s\n", pages, bytes / touch / 1e9);
        printf("%-11s receive into random slots: %.2f GB/s\n", pages, move(NULL, region, bytes / VALUE));
        printf("%-11s send from random slots:    %.2f GB/s\n", pages, move(region, NULL, bytes / VALUE));
        munmap(raw, bytes + HUGE);
    }
    return 0;
}
