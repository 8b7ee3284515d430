# What the benchmark scripts share (sourced by bench-ingest.sh and bench-serve.sh, after each
# defines its own `log`): a free loopback port, waiting for a listener, and reading
# `/usr/bin/time -v`'s output.

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() { # PORT: until something listens (at most 20 s)
    for _ in $(seq 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    log "nothing listens on 127.0.0.1:$1"
    return 1
}

# /usr/bin/time -v output -> "user+sys seconds" and "max RSS kB"
cpu_of() { awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {printf "%.3f", u+s}' "$1"; }
rss_of() { awk -F': ' '/Maximum resident set size/ {print $2}' "$1"; }
