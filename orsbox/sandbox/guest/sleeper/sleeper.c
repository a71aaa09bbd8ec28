/* The sleeping guest's native stand-in (orsbox/sandbox/guest/inside/sleep.py).

   An idle python guest execs this program in its place (same pid, same descriptors):
   84 KiB resident (20 KiB of its own and this program's 62 KB in a memfd), where the
   interpreter holds 3.4 MiB of its own, and it answers the host's plain shell calls
   itself, so a call to a sleeping sandbox costs it 0.25 ms of CPU, not the 10-17 ms of
   a python start. Anything else it hands to
   the python guest, by exec, with what it has read so far:

     - a request that is not `shell`, or one it cannot read as plainly as it expects,
       or one that finds output of the shell's waiting from after the last call;
     - a shell call still running when another request arrives or its deadline passes,
       or whose output is larger than its cap or this program's buffer, holds the
       shell's token anywhere but its end, or comes with an OOM kill;
     - a shell call that leaves a process running (the awake guest watches those);
     - the end of stdin (the host is gone: the python guest stops the sandbox).

   The python guest that wakes (`serve.main`, `--handoff FD`) gets a memfd: one line of
   JSON (`{"call": null | {...}, "input": N, "output": N, "jobs": N}`), then the stdin
   bytes read and not answered, the call's output so far, and the shell's children when
   the call began. It then does exactly what it would have done had it read them
   itself, so the rules of a call (timeouts, kill sweeps, caps, notes) live in one
   place, the python guest; this program answers only calls where none of them apply.

   Its arguments, from `sleep.py`: SHELL_PID SHELL_STDIN SHELL_OUT SCRIPT CHILDREN
   TOKEN OOM_FILE LINE EVAL -- PYTHON_ARGV... (the python guest's, `--wake FD` included).
   Static, no libc but musl's (`__init__.py`): it runs in any image of the host's
   architecture. */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#define HEADER_MAX 4096        /* a shell request's header is under 100 bytes */
#define COMMAND_MAX 65536      /* a longer command goes to the python guest */
#define OUTPUT_MAX 65536       /* so does output past this (or past the call's cap) */
#define STATUS_MAX 3           /* digits in the sentinel's status, as in shell.py */

struct shell {
    pid_t pid;
    int in, out, script, children;
    const char *token, *oom_file, *line, *eval;
};

struct call {                  /* a shell call, as the python guest's ShellCall needs it */
    long long id, cap, start_tick, oom_before;
    char timeout[32];          /* the request's number, as its JSON wrote it */
    double started;
};

static char **python_argv;
static unsigned char input[8 + HEADER_MAX + COMMAND_MAX];
static size_t input_len;
static unsigned char output[OUTPUT_MAX + 64];
static size_t output_len;
static char jobs[4096];
static size_t jobs_len;

static void write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            struct pollfd w = {fd, POLLOUT, 0};
            poll(&w, 1, -1);
            continue;
        }
        if (n <= 0) return;
        p += n;
        len -= (size_t)n;
    }
}

/* Give everything to the python guest: it continues as if it had read it all. */
static void hand_off(const struct call *call) {
    char head[512];
    int n;
    if (call)
        n = snprintf(head, sizeof head,
                     "{\"call\": {\"id\": %lld, \"timeout\": %s, \"cap\": %lld, \"started\": %.6f,"
                     " \"start_tick\": %lld, \"oom_before\": %lld}, \"input\": %zu, \"output\": %zu,"
                     " \"jobs\": %zu}\n",
                     call->id, call->timeout, call->cap, call->started, call->start_tick,
                     call->oom_before, input_len, output_len, jobs_len);
    else
        n = snprintf(head, sizeof head, "{\"call\": null, \"input\": %zu, \"output\": 0, \"jobs\": 0}\n",
                     input_len);
    int fd = memfd_create("orsbox-handoff", 0);
    if (fd >= 0) {
        write_all(fd, head, (size_t)n);
        write_all(fd, input, input_len);
        if (call) {
            write_all(fd, output, output_len);
            write_all(fd, jobs, jobs_len);
        }
        int argc = 0;
        while (python_argv[argc]) argc++;
        char fd_text[16];
        snprintf(fd_text, sizeof fd_text, "%d", fd);
        char **argv = calloc((size_t)argc + 3, sizeof *argv);
        if (argv) {
            memcpy(argv, python_argv, (size_t)argc * sizeof *argv);
            argv[argc] = "--handoff";
            argv[argc + 1] = fd_text;
            execvp(argv[0], argv);
        }
    }
    dprintf(2, "orsbox-guest: the sleeping guest could not wake: %s\n", strerror(errno));
    _exit(1);
}

/* A frame's length: 4 bytes, big-endian (the wire's `>I`). */
static uint32_t be32(const unsigned char *b) {
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Read exactly len bytes of stdin (blocking) into `input`; 0 at its end. */
static int read_input(size_t len) {
    while (len > 0) {
        ssize_t n = read(0, input + input_len, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            struct pollfd r = {0, POLLIN, 0};
            poll(&r, 1, -1);
            continue;
        }
        if (n <= 0) return 0;
        input_len += (size_t)n;
        len -= (size_t)n;
    }
    return 1;
}

/* The header's values this program reads. Plain JSON only: a flat object of numbers
   and strings without escapes, with exactly the keys the host writes for `shell`; 0 for
   anything else (a key added later included), which the python guest then reads. */
static int parse_header(const char *p, const char *end, struct call *call, int *is_shell) {
    int seen = 0;
    *is_shell = 0;
    while (p < end && *p != '{') p++;
    if (p == end) return 0;
    p++;
    for (;;) {
        while (p < end && (*p == ' ' || *p == ',')) p++;
        if (p < end && *p == '}') return seen == 15;
        if (p == end || *p != '"') return 0;
        const char *key = ++p;
        while (p < end && *p != '"' && *p != '\\') p++;
        if (p == end || *p != '"') return 0;
        size_t key_len = (size_t)(p - key);
        p++;
        while (p < end && (*p == ' ' || *p == ':')) p++;
        const char *value = p;
        if (p < end && *p == '"') {
            value = ++p;
            while (p < end && *p != '"' && *p != '\\') p++;
            if (p == end || *p != '"') return 0;
            if (key_len != 2 || memcmp(key, "op", 2)) return 0;
            if (p - value != 5 || memcmp(value, "shell", 5)) return 0;
            *is_shell = 1;
            seen |= 1;
            p++;
            continue;
        }
        while (p < end && *p && strchr("0123456789.-+eE", *p)) p++;
        size_t len = (size_t)(p - value);
        if (len == 0 || len >= sizeof call->timeout) return 0;
        char number[32];
        memcpy(number, value, len);
        number[len] = 0;
        char *rest;
        if (key_len == 2 && !memcmp(key, "id", 2)) {
            call->id = strtoll(number, &rest, 10);
            if (*rest) return 0;
            seen |= 8;
        } else if (key_len == 3 && !memcmp(key, "cap", 3)) {
            call->cap = strtoll(number, &rest, 10);
            if (*rest || call->cap < 2) return 0;
            seen |= 2;
        } else if (key_len == 7 && !memcmp(key, "timeout", 7)) {
            double t = strtod(number, &rest);
            if (*rest || !(t > 0)) return 0;
            memcpy(call->timeout, number, len + 1);
            seen |= 4;
        } else {
            return 0;
        }
    }
}

static long long clock_ticks(void) {
    struct timespec t;
    clock_gettime(CLOCK_BOOTTIME, &t);
    long hz = sysconf(_SC_CLK_TCK);
    return (long long)t.tv_sec * hz + (long long)t.tv_nsec * hz / 1000000000LL;
}

static double wall_time(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long long oom_count(const char *path) {
    if (!*path) return -1;
    char text[4096];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return -1;
    text[n] = 0;
    for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (!strncmp(line, "oom_kill ", 9)) return strtoll(line + 9, NULL, 10);
    return -1;
}

/* /proc/PID/stat's parent and start tick; 0 if there is no such process. */
static int stat_of(long pid, long *ppid, long long *start) {
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return 0;
    text[n] = 0;
    char *p = strrchr(text, ')');  /* the name may hold spaces and ')' */
    if (!p) return 0;
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
       utime stime cutime cstime priority nice threads itrealvalue starttime */
    char state;
    unsigned long long fields[19];
    if (sscanf(p + 2, "%c %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu"
                      " %llu %llu %llu %llu %llu", &state, &fields[0], &fields[1], &fields[2],
               &fields[3], &fields[4], &fields[5], &fields[6], &fields[7], &fields[8], &fields[9],
               &fields[10], &fields[11], &fields[12], &fields[13], &fields[14], &fields[15],
               &fields[16], &fields[17], &fields[18]) != 20)
        return 0;
    *ppid = (long)fields[0];
    *start = (long long)fields[18];
    return 1;
}

/* Whether anything runs that the sandbox's user started, the shell aside: the python
   guest's `Guest.started_here`, which keeps it awake while such a process lives. */
static int others_running(pid_t shell) {
    long me = getpid(), ppid, pid;
    long long born, start;
    long keep[64];
    int kept = 0;
    if (!stat_of(me, &ppid, &born)) return 1;
    for (pid = me; pid > 1 && kept < 64 && stat_of(pid, &ppid, &start); pid = ppid) keep[kept++] = pid;
    DIR *proc = opendir("/proc");
    if (!proc) return 1;
    struct dirent *entry;
    int found = 0;
    while (!found && (entry = readdir(proc))) {
        char *end;
        pid = strtol(entry->d_name, &end, 10);
        if (*end || pid <= 1 || pid == shell) continue;
        int ancestor = 0;
        for (int i = 0; i < kept; i++) ancestor |= keep[i] == pid;
        if (ancestor || !stat_of(pid, &ppid, &start) || ppid == 0) continue;
        found = start > born || (start == born && ppid != 1);
    }
    closedir(proc);
    return found;
}

static int shell_alive(pid_t pid) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) < 0) return 0;
    return info.si_pid == 0;
}

/* Write the command where the shell sources it from, then the line that sources it. */
static int send_command(const struct shell *sh, const unsigned char *command, size_t len) {
    static char script[4 * COMMAND_MAX + 256];
    size_t n = 0;
    n += (size_t)sprintf(script, "__orsbox_c='");
    for (size_t i = 0; i < len; i++) {
        if (command[i] == 0) continue;
        if (command[i] == '\'') {
            memcpy(script + n, "'\\''", 4);
            n += 4;
        } else {
            script[n++] = (char)command[i];
        }
    }
    script[n++] = '\'';
    script[n++] = '\n';
    size_t eval_len = strlen(sh->eval);
    memcpy(script + n, sh->eval, eval_len);
    n += eval_len;
    if (lseek(sh->script, 0, SEEK_SET) < 0 || ftruncate(sh->script, 0) < 0) return 0;
    write_all(sh->script, script, n);
    return write(sh->in, sh->line, strlen(sh->line)) == (ssize_t)strlen(sh->line);
}

static const unsigned char *find(const unsigned char *hay, size_t len, const char *needle, size_t nlen) {
    for (size_t i = 0; i + nlen <= len; i++)
        if (hay[i] == (unsigned char)needle[0] && !memcmp(hay + i, needle, nlen)) return hay + i;
    return NULL;
}

/* The call's status if its output ends with the sentinel (NUL TOKEN ':' 1-3 digits
   NUL), the token nowhere before it, and `at` where it starts; WAIT if the sentinel may
   still be on its way; ELSEWHERE for anything else the token is in, which the python
   guest's scan reads (shell.py: look-alikes, output after the sentinel). */
#define WAIT (-1)
#define ELSEWHERE (-2)
static int ended_status(const char *sentinel, size_t sentinel_len, size_t *at) {
    const unsigned char *found = find(output, output_len, sentinel, sentinel_len);
    if (!found) return WAIT;
    size_t start = (size_t)(found - output), i = start + sentinel_len;
    int status = 0, digits = 0;
    for (; i < output_len && output[i] >= '0' && output[i] <= '9' && digits <= STATUS_MAX; i++, digits++)
        status = status * 10 + (output[i] - '0');
    if (i == output_len && digits <= STATUS_MAX) return WAIT;
    if (digits < 1 || digits > STATUS_MAX || output[i] != 0 || i != output_len - 1) return ELSEWHERE;
    *at = start;
    return status;
}

static void read_jobs(int children) {
    jobs_len = 0;
    if (children < 0) return;
    ssize_t n = pread(children, jobs, sizeof jobs, 0);
    if (n > 0) jobs_len = (size_t)n;
}

/* One shell call, answered here or handed off. */
static void serve_shell(const struct shell *sh, struct call *call, size_t header_len) {
    size_t command_at = 8 + header_len;
    call->oom_before = oom_count(sh->oom_file);
    call->started = wall_time();
    call->start_tick = clock_ticks();
    read_jobs(sh->children);
    output_len = 0;
    size_t command_len = input_len - command_at;
    input_len = 0;  /* the request is the call's now */
    if (!send_command(sh, input + command_at, command_len)) hand_off(call);
    char sentinel[64];
    size_t sentinel_len = (size_t)snprintf(sentinel, sizeof sentinel, "%c%s:", 0, sh->token);
    double deadline = call->started + strtod(call->timeout, NULL);
    int status;
    size_t bytes = 0;
    while ((status = ended_status(sentinel, sentinel_len, &bytes)) == WAIT) {
        double left = deadline - wall_time();
        if (left <= 0 || output_len >= OUTPUT_MAX) hand_off(call);
        struct pollfd fds[2] = {{sh->out, POLLIN, 0}, {0, POLLIN, 0}};
        int ready = poll(fds, 2, (int)(left * 1000) + 1);
        if (ready < 0 && errno != EINTR) hand_off(call);
        if (fds[1].revents) hand_off(call);  /* another request: the python guest reads it */
        if (fds[0].revents) {
            ssize_t n = read(sh->out, output + output_len, OUTPUT_MAX - output_len);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) hand_off(call);
            if (n > 0) output_len += (size_t)n;
        }
    }
    if (status == ELSEWHERE || (long long)bytes > call->cap || oom_count(sh->oom_file) != call->oom_before)
        hand_off(call);
    if (find(output, bytes, sh->token, strlen(sh->token))) hand_off(call);
    char header[256];
    int n = snprintf(header, sizeof header,
                     "{\"ok\": true, \"exit\": %d, \"timed_out\": false, \"truncated\": false,"
                     " \"bytes\": %zu, \"oom\": false, \"duration\": %.6f, \"id\": %lld}",
                     status, bytes, wall_time() - call->started, call->id);
    unsigned char lengths[8];
    uint32_t h = (uint32_t)n, p = (uint32_t)bytes;
    for (int i = 0; i < 4; i++) {
        lengths[i] = (unsigned char)(h >> (24 - 8 * i));
        lengths[4 + i] = (unsigned char)(p >> (24 - 8 * i));
    }
    static unsigned char reply[8 + 256 + OUTPUT_MAX];
    memcpy(reply, lengths, 8);
    memcpy(reply + 8, header, (size_t)n);
    memcpy(reply + 8 + n, output, bytes);
    write_all(1, reply, 8 + (size_t)n + bytes);
}

int main(int argc, char **argv) {
    if (argc < 12 || strcmp(argv[10], "--")) {
        dprintf(2, "orsbox-guest: the sleeper's arguments are wrong\n");
        return 2;
    }
    struct shell sh = {(pid_t)atol(argv[1]), atoi(argv[2]), atoi(argv[3]), atoi(argv[4]),
                       atoi(argv[5]), argv[6], argv[7], argv[8], argv[9]};
    python_argv = argv + 11;
    for (;;) {
        input_len = 0;
        if (!read_input(1) || input[0] != '\n') hand_off(NULL);  /* the host gone, or not a wake */
        input_len = 0;  /* the wake byte is not the frame's */
        if (!read_input(8)) hand_off(NULL);
        uint32_t header_len = be32(input), payload_len = be32(input + 4);
        if (header_len > HEADER_MAX || !read_input(header_len)) hand_off(NULL);
        struct call call = {0};
        int is_shell;
        int plain = parse_header((char *)input + 8, (char *)input + 8 + header_len, &call, &is_shell);
        if (!plain || !is_shell || payload_len > COMMAND_MAX || !shell_alive(sh.pid)) hand_off(NULL);
        if (!read_input(payload_len)) hand_off(NULL);
        /* what the shell printed since the last call (a command line that went on after
           a forged sentinel) the python guest keeps for the next call's output */
        struct pollfd printed = {sh.out, POLLIN, 0};
        if (poll(&printed, 1, 0) != 0) hand_off(NULL);
        serve_shell(&sh, &call, header_len);
        if (others_running(sh.pid)) hand_off(NULL);
    }
}
