/* cycle.c: closed-loop job loads against Disque servers, from one epoll loop.
 *
 *     cycle HOST PORT CONNECTIONS WARMUP_S SECONDS [ADDJOB-ARG ...]
 *     cycle -f PORT_B [-c CONSUMERS] [-b BACKLOG]
 *           HOST PORT CONNECTIONS WARMUP_S SECONDS [ADDJOB-ARG ...]
 *
 * Cycles (the first form): CONNECTIONS non-blocking TCP connections to PORT,
 * connection i looping
 *
 *     ADDJOB q<i> <100-byte body> 0 [ADDJOB-ARG ...] -> GETJOB FROM q<i> -> ACKJOB <id>
 *
 * each command sent once the previous reply has arrived; the job ID is read
 * from the GETJOB reply. ADDJOB-ARGs are appended to every ADDJOB (e.g.
 * REPLICATE 3).
 *
 * Federation (-f): CONNECTIONS producers to PORT (node A), each looping
 * ADDJOB fed <100-byte body> 0 [ADDJOB-ARG ...], and CONSUMERS connections
 * (default 8) to PORT_B (node B, same HOST), each looping
 *
 *     GETJOB TIMEOUT 100 COUNT 100 FROM fed -> ACKJOB <every ID it got>
 *
 * so that every job travels from A to B. A producer waits while BACKLOG
 * jobs (default 10,000) are added and not yet delivered on B: the rate is
 * what the cluster carries end to end, not how far A's queue can grow. The
 * consumers connect once A has answered 100 ADDJOBs: a node whose client
 * blocks broadcasts NEEDJOBS to find the queue's sources, and Disque
 * 1.0-rc1, when that first broadcast finds no job, sends the next one only
 * 4 s later (exponential delays from 2 s), which a short run would measure.
 *
 * After WARMUP_S seconds it prints the line "measuring"; SECONDS later one
 * line of key=value fields, and exits:
 *
 *     cycles: cycles=N seconds=S cycles_per_s=R cpu_percent=C user_percent=U
 *     -f:     jobs=N seconds=S jobs_per_s=R added_per_s=A backlog=B cpu_percent=C
 *             user_percent=U
 *
 * where jobs are those GETJOB delivered on B, B the jobs added and not yet
 * delivered at the end (near BACKLOG: carrying them to B is the limit, not
 * adding them), C is this process's own CPU
 * time (user + system) over the measured window in percent of one core and
 * U its user-space part. Near 100% would mean the loader is the limit; most
 * of C is the kernel sending on loopback (each write delivers to the
 * server's socket), U is this code. An error reply or a lost connection ends
 * it with status 1. Built by the benchmarks (compare.py) with `cc -O2`.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BODY_SIZE 100
#define MAX_CONNECTIONS 1024
#define MAX_ADDJOB_ARGS 16
#define BUFFER_SIZE 65536  /* one reply at a time: GETJOB COUNT 100 is ~18 kB */
#define FED_QUEUE "fed"
#define FED_COUNT 100
#define FED_TIMEOUT_MS "100"
#define DEFAULT_CONSUMERS 8
#define DEFAULT_BACKLOG 10000
#define CONSUMERS_WAIT_S 5.0  /* at most, for A to answer FED_COUNT ADDJOBs */
#define MAX_ARG_LEN 64         /* a job ID, an ADDJOB-ARG */
#define COMMAND_SIZE (FED_COUNT * (MAX_ARG_LEN + 8) + 64)

enum role { CYCLER, PRODUCER, CONSUMER };
enum step { ADD, GET, ACK };

struct conn {
    int fd;
    int index;
    enum role role;
    enum step step;
    size_t used;                 /* bytes of the pending reply in buf */
    char *buf;
};

static char body[BODY_SIZE + 1];
static int extra_argc;           /* the ADDJOB-ARGs */
static char **extra_argv;
static long long completed;      /* cycles, or jobs delivered on B */
static long long added;          /* federation: ADDJOBs answered */
static long long backlog_limit = DEFAULT_BACKLOG;
static struct conn *parked[MAX_CONNECTIONS];   /* producers waiting on the backlog */
static int parked_count;

static void die(const char *what) {
    fprintf(stderr, "cycle: %s\n", what);
    exit(1);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* This process's CPU seconds so far: user, and user + system. */
static void cpu_times(double *user, double *total) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
    *total = *user + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* Bytes up to and including the first '\n' in p[0..n), or 0 if there is none. */
static size_t line_len(const char *p, size_t n) {
    const char *nl = memchr(p, '\n', n);
    return nl ? (size_t)(nl - p) + 1 : 0;
}

/* Length of the complete RESP reply at p[0..n), or 0 if more bytes are needed. */
static size_t reply_len(const char *p, size_t n) {
    size_t head = line_len(p, n);
    if (head == 0) return 0;
    long count = atol(p + 1);
    switch (p[0]) {
    case '+': case '-': case ':':
        return head;
    case '$':
        if (count < 0) return head;
        return n >= head + count + 2 ? head + count + 2 : 0;
    case '*': {
        size_t used = head;
        for (long i = 0; i < count; i++) {
            size_t len = reply_len(p + used, n - used);
            if (len == 0) return 0;
            used += len;
        }
        return used;
    }
    }
    die("unexpected reply type");
    return 0;
}

/* Appends one RESP bulk string to out (room checked by the caller's sizes). */
static int put_bulk(char *out, const char *s, size_t len) {
    int head = sprintf(out, "$%zu\r\n", len);
    memcpy(out + head, s, len);
    memcpy(out + head + len, "\r\n", 2);
    return head + (int)len + 2;
}

static void send_all(struct conn *c, const char *cmd, int len) {
    /* One command on an idle connection always fits in the socket buffer. */
    if (write(c->fd, cmd, len) != len) die("short write");
}

/* ADDJOB <queue> <body> 0 [ADDJOB-ARG ...] */
static void send_addjob(struct conn *c) {
    char cmd[BODY_SIZE + (MAX_ADDJOB_ARGS + 4) * (MAX_ARG_LEN + 8)], queue[32];
    int qlen = c->role == PRODUCER ? snprintf(queue, sizeof queue, FED_QUEUE)
                                   : snprintf(queue, sizeof queue, "q%d", c->index);
    int len = sprintf(cmd, "*%d\r\n", 4 + extra_argc);
    len += put_bulk(cmd + len, "ADDJOB", 6);
    len += put_bulk(cmd + len, queue, qlen);
    len += put_bulk(cmd + len, body, BODY_SIZE);
    len += put_bulk(cmd + len, "0", 1);
    for (int i = 0; i < extra_argc; i++)
        len += put_bulk(cmd + len, extra_argv[i], strlen(extra_argv[i]));
    c->step = ADD;
    send_all(c, cmd, len);
}

static void send_getjob(struct conn *c) {
    char cmd[256], queue[32];
    int len;
    if (c->role == CONSUMER) {
        char count[16];
        int clen = snprintf(count, sizeof count, "%d", FED_COUNT);
        len = sprintf(cmd, "*7\r\n");
        len += put_bulk(cmd + len, "GETJOB", 6);
        len += put_bulk(cmd + len, "TIMEOUT", 7);
        len += put_bulk(cmd + len, FED_TIMEOUT_MS, strlen(FED_TIMEOUT_MS));
        len += put_bulk(cmd + len, "COUNT", 5);
        len += put_bulk(cmd + len, count, clen);
        len += put_bulk(cmd + len, "FROM", 4);
        len += put_bulk(cmd + len, FED_QUEUE, strlen(FED_QUEUE));
    } else {
        int qlen = snprintf(queue, sizeof queue, "q%d", c->index);
        len = sprintf(cmd, "*3\r\n");
        len += put_bulk(cmd + len, "GETJOB", 6);
        len += put_bulk(cmd + len, "FROM", 4);
        len += put_bulk(cmd + len, queue, qlen);
    }
    c->step = GET;
    send_all(c, cmd, len);
}

/* ACKJOB with the ID of every job in a complete GETJOB reply ([[queue, id,
 * body], ...]); returns the number of jobs, 0 (and nothing sent) for none. */
static long send_ackjob(struct conn *c, const char *r, size_t n) {
    long jobs = r[0] == '*' ? atol(r + 1) : 0;
    if (jobs <= 0) return 0;
    if (jobs > FED_COUNT) die("GETJOB returned more jobs than asked for");
    char cmd[COMMAND_SIZE];
    int len = sprintf(cmd, "*%ld\r\n", jobs + 1);
    len += put_bulk(cmd + len, "ACKJOB", 6);
    const char *p = r + line_len(r, n);              /* at "*3": the first job */
    for (long i = 0; i < jobs; i++) {
        const char *job = p;
        p += line_len(p, n - (p - r));               /* at "$len": the queue */
        p += reply_len(p, n - (p - r));              /* at "$len": the ID */
        long id_len = atol(p + 1);
        if (id_len < 1 || id_len > MAX_ARG_LEN) die("unexpected job ID length");
        len += put_bulk(cmd + len, p + line_len(p, n - (p - r)), id_len);
        p = job + reply_len(job, n - (job - r));     /* the next job */
    }
    c->step = ACK;
    send_all(c, cmd, len);
    return jobs;
}

/* A producer's next ADDJOB, or a wait while the backlog is full. */
static void produce(struct conn *c) {
    if (added - completed >= backlog_limit) parked[parked_count++] = c;
    else send_addjob(c);
}

static void unpark_producers(void) {
    while (parked_count > 0 && added - completed < backlog_limit)
        send_addjob(parked[--parked_count]);
}

static void on_cycler_reply(struct conn *c, size_t len) {
    switch (c->step) {
    case ADD: send_getjob(c); break;
    case GET:
        if (send_ackjob(c, c->buf, len) != 1) die("GETJOB returned no job");
        break;
    case ACK: completed++; send_addjob(c); break;
    }
}

static void on_consumer_reply(struct conn *c, size_t len) {
    long jobs;
    switch (c->step) {
    case GET:
        jobs = send_ackjob(c, c->buf, len);
        if (jobs == 0) send_getjob(c);             /* timed out empty: ask again */
        completed += jobs;
        unpark_producers();
        break;
    case ACK: send_getjob(c); break;
    case ADD: die("consumer in the ADD step");
    }
}

/* A whole reply to the connection's last command is in c->buf: send the next one. */
static void on_reply(struct conn *c, size_t len) {
    if (c->buf[0] == '-') {
        fprintf(stderr, "cycle: error reply: %.*s", (int)len, c->buf);
        exit(1);
    }
    switch (c->role) {
    case CYCLER: on_cycler_reply(c, len); break;
    case PRODUCER: added++; produce(c); break;
    case CONSUMER: on_consumer_reply(c, len); break;
    }
}

/* Read until the reply to the connection's last command is whole, then answer it. */
static void on_readable(struct conn *c) {
    for (;;) {
        ssize_t got = read(c->fd, c->buf + c->used, BUFFER_SIZE - c->used);
        if (got == 0) die("connection closed by the server");
        if (got < 0) {
            if (errno == EAGAIN) return;
            die(strerror(errno));
        }
        c->used += got;
        size_t len = reply_len(c->buf, c->used);
        if (len == 0) {
            if (c->used == BUFFER_SIZE) die("reply larger than the buffer");
            continue;
        }
        if (len != c->used) die("more than one reply pending");
        c->used = 0;
        on_reply(c, len);
        return;   /* nothing more can arrive before the next command's reply */
    }
}

static int connect_to(const char *host, int port) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) die("bad host address");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) die(strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* Connects `c` to host:port in the given role, registers it and sends its first command. */
static void open_conn(int ep, struct conn *c, const char *host, int port, enum role role,
                      int index) {
    c->fd = connect_to(host, port);
    c->index = index;
    c->role = role;
    if ((c->buf = malloc(BUFFER_SIZE)) == NULL) die("out of memory");
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) die(strerror(errno));
    if (role == CONSUMER) send_getjob(c);
    else send_addjob(c);
}

/* Run the event loop until `deadline` (seconds on now()'s clock), or until
 * `until_added` ADDJOBs are answered when it is not 0. */
static void run_until(int ep, double deadline, long long until_added) {
    struct epoll_event events[64];
    double left;
    while ((left = deadline - now()) > 0 && (until_added == 0 || added < until_added)) {
        int n = epoll_wait(ep, events, 64, (int)(left * 1000) + 1);
        if (n < 0 && errno != EINTR) die(strerror(errno));
        for (int i = 0; i < n; i++) on_readable(events[i].data.ptr);
    }
}

static void usage(void) {
    die("usage: cycle [-f PORT_B [-c CONSUMERS] [-b BACKLOG]] HOST PORT CONNECTIONS "
        "WARMUP_S SECONDS [ADDJOB-ARG ...]");
}

int main(int argc, char **argv) {
    int port_b = 0, consumers = DEFAULT_CONSUMERS, opt;
    while ((opt = getopt(argc, argv, "+f:c:b:")) != -1) {
        switch (opt) {
        case 'f': port_b = atoi(optarg); break;
        case 'c': consumers = atoi(optarg); break;
        case 'b': backlog_limit = atoll(optarg); break;
        default: usage();
        }
    }
    argv += optind;
    argc -= optind;
    if (argc < 5) usage();
    const char *host = argv[0];
    int port = atoi(argv[1]), connections = atoi(argv[2]);
    double warmup = atof(argv[3]), seconds = atof(argv[4]);
    extra_argc = argc - 5;
    extra_argv = argv + 5;
    if (extra_argc > MAX_ADDJOB_ARGS) die("too many ADDJOB-ARGs");
    for (int i = 0; i < extra_argc; i++)
        if (strlen(extra_argv[i]) > MAX_ARG_LEN) die("ADDJOB-ARG too long");
    if (port_b == 0) consumers = 0;
    if (connections < 1 || connections + consumers > MAX_CONNECTIONS || consumers < 0 ||
        (port_b && consumers < 1) || backlog_limit < 1)
        usage();
    memset(body, 'x', BODY_SIZE);

    static struct conn conns[MAX_CONNECTIONS];
    int ep = epoll_create1(0);
    for (int i = 0; i < connections; i++)
        open_conn(ep, &conns[i], host, port, port_b ? PRODUCER : CYCLER, i);
    if (consumers > 0)   /* B's first NEEDJOBS finds jobs on A (see the top) */
        run_until(ep, now() + CONSUMERS_WAIT_S, FED_COUNT);
    for (int i = 0; i < consumers; i++)
        open_conn(ep, &conns[connections + i], host, port_b, CONSUMER, i);

    run_until(ep, now() + warmup, 0);
    printf("measuring\n");
    fflush(stdout);
    long long completed0 = completed, added0 = added;
    double wall0 = now(), user0, cpu0, user1, cpu1;
    cpu_times(&user0, &cpu0);
    run_until(ep, wall0 + seconds, 0);
    double wall = now() - wall0;
    cpu_times(&user1, &cpu1);
    const char *what = port_b ? "jobs" : "cycles";
    printf("%s=%lld seconds=%.3f %s_per_s=%.1f", what, completed - completed0, wall, what,
           (completed - completed0) / wall);
    if (port_b) printf(" added_per_s=%.1f backlog=%lld", (added - added0) / wall, added - completed);
    printf(" cpu_percent=%.1f user_percent=%.1f\n", 100.0 * (cpu1 - cpu0) / wall,
           100.0 * (user1 - user0) / wall);
    return 0;
}
