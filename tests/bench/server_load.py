#!/usr/bin/env python3
"""Load on spillway-cli serve: C concurrent clients, each sending R streamed chat requests (greedy,
max_tokens T) one after another; prints JSON with requests/s and the median time to first token
and request time. Standard library only. Usage: server_load.py URL CLIENTS REQUESTS TOKENS PROMPT"""
import http.client, json, statistics, sys, threading, time, urllib.parse

url, clients, requests, tokens, prompt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
parts = urllib.parse.urlparse(url)
ttft, latency, errors = [], [], []
lock = threading.Lock()


def client(index):
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    for r in range(requests):
        # Each request its own conversation (a varied first word), so no slot cache serves it.
        body = json.dumps({"messages": [{"role": "user", "content": f"{index * 1000 + r} {prompt}"}],
                           "max_tokens": tokens, "temperature": 0, "stream": True})
        start = time.perf_counter()
        conn.request("POST", parts.path + "/chat/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        first = None
        for line in resp:
            if first is None and line.startswith(b"data: ") and b'"content":"' in line and b'"content":""' not in line:
                first = time.perf_counter() - start
        end = time.perf_counter() - start
        with lock:
            if resp.status != 200 or first is None:
                errors.append(resp.status)
            else:
                ttft.append(first)
                latency.append(end)
    conn.close()


threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
wall = time.perf_counter()
for t in threads:
    t.start()
for t in threads:
    t.join()
wall = time.perf_counter() - wall
print(json.dumps({"clients": clients, "requests": len(latency), "errors": len(errors),
                  "requests_per_s": len(latency) / wall,
                  "time_to_first_token_ms_median": 1000 * statistics.median(ttft) if ttft else None,
                  "request_ms_median": 1000 * statistics.median(latency) if latency else None}))
