# Starts and stops a private nginx on 127.0.0.1 for Scripts/try and Scripts/bench.
# Source it, then:  nginx_start <workdir> <docroot> [limit_rate] [delay_s] [h2|h1]   → sets NGINX_PORT
#   delay_s: wait that long before each answer (nginx's echo module, echo_sleep), to show
#            what a real network's round trips cost; loopback has none.
#   h2:      https with HTTP/2 (as the Hugging Face Hub and its CDN answer), with a
#            self-signed certificate for 127.0.0.1 made by openssl: <workdir>/cert.pem, which
#            a client must trust (glasses-local: EXTENTOS_CA_FILE; curl: --cacert).
#   h1:      the same https, HTTP/1.1 only.
#                   nginx_stop <workdir>
# Everything (config, pid, logs, temp folders) lives in <workdir> (logs/access.log, and
# logs/timing.log: when each request came); the port is a free one found by trying random
# high ports (no root needed, nothing system-wide touched).

nginx_start() {
  local work root="$2" rate="${3:-0}" delay="${4:-}" tls_mode="${5:-}"
  mkdir -p "$1" && work=$(cd "$1" && pwd)
  local nginx_bin
  nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
  [[ -x "$nginx_bin" ]] || { echo "nginx not found: run Scripts/bootstrap" >&2; return 1; }
  mkdir -p "$work/tmp" "$work/logs"
  local attempt port load="" locations=""
  if [[ -n "$delay" ]]; then
    load="load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;"
    locations="location / { echo_sleep $delay; echo_exec @file; }
    location @file { }"
  fi
  local tls="" listen_options=""
  if [[ "$tls_mode" == h2 || "$tls_mode" == h1 ]]; then
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" -days 2 \
      -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
    tls="ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem;"
    # nginx 1.25.1 moved HTTP/2 from a listen parameter to a directive of its own.
    if [[ "$tls_mode" == h1 ]]; then
      listen_options="ssl"
    elif printf '%s\n' "$("$nginx_bin" -v 2>&1 | sed 's|.*/||')" 1.25.1 | sort -V -C; then
      listen_options="ssl http2"
    else
      listen_options="ssl"; tls="$tls http2 on;"
    fi
  fi
  for attempt in $(seq 1 20); do
    port=$((20000 + RANDOM % 40000))
    cat > "$work/nginx.conf" <<CONF
$load
worker_processes 1;
daemon on;
pid $work/nginx.pid;
error_log $work/logs/error.log warn;
events { worker_connections 256; }
http {
  log_format transfer '\$request \$status range=\$http_range if_range=\$http_if_range sent=\$body_bytes_sent connection=\$connection t=\$msec';
  access_log $work/logs/access.log transfer;
  # When each request came (\$msec - \$request_time, ms resolution): Scripts/bench firstbyte.
  log_format timing '\$msec \$request_time \$request';
  access_log $work/logs/timing.log timing;
  client_body_temp_path $work/tmp/body;
  proxy_temp_path $work/tmp/proxy;
  fastcgi_temp_path $work/tmp/fastcgi;
  uwsgi_temp_path $work/tmp/uwsgi;
  scgi_temp_path $work/tmp/scgi;
  sendfile on;
  server {
    listen 127.0.0.1:$port $listen_options;
    $tls
    root $root;
    limit_rate $rate;
    $locations
  }
}
CONF
    if "$nginx_bin" -c "$work/nginx.conf" -p "$work" 2>"$work/logs/start.err"; then
      NGINX_PORT=$port
      export NGINX_PORT
      return 0
    fi
    grep -q "Address already in use" "$work/logs/start.err" || { cat "$work/logs/start.err" >&2; return 1; }
  done
  echo "could not find a free port for nginx" >&2
  return 1
}

nginx_stop() {
  local work
  work=$(cd "$1" 2>/dev/null && pwd) || return 0
  if [[ -f "$work/nginx.pid" ]]; then
    kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
    rm -f "$work/nginx.pid"
  fi
}
