//go:build ignore

// SPDX-License-Identifier: GPL-2.0
//
// Kernel side of tenantmcp's egress guard. Every program here is attached to
// one dedicated cgroup v2 directory that holds the guarded server process and
// everything it forks or execs. The policy is an allowlist: an IPv4 or IPv6
// destination is permitted only when the longest matching prefix in allow4 /
// allow6 carries a port range that contains the destination port. Everything
// else that leaves a socket of the cgroup is denied; AF_UNIX is never seen by
// these hooks and is unaffected.
//
// Hooks and why each exists:
//   cgroup/connect4, connect6   connect(2) on TCP/UDP (and TCP fast open):
//                               EPERM before a SYN or a connected UDP socket
//                               exists.
//   cgroup/sendmsg4, sendmsg6   sendto/sendmsg with an address on UDP
//                               (connectionless datagrams): EPERM.
//   cgroup_skb/egress           every IP packet a socket of the cgroup emits:
//                               re-checks the destination so that a connection
//                               established before its destination left the
//                               allowlist stops carrying data, and catches
//                               sockets that no sock_addr hook sees (raw, ping).
//                               Connected UDP sends get EPERM from here.
//   sockops                     tags sockets created by accept(2) as inbound,
//                               so replies on the server's own inbound
//                               connections stay writable whatever the
//                               allowlist says.
//   iter/tcp (sweep)            run by user space after a policy change that
//                               removes destinations: aborts outbound TCP
//                               connections whose destination is no longer
//                               allowed (bpf_sock_destroy), so send/write on
//                               them fail with ECONNABORTED/EPIPE instead of
//                               queueing data that can never leave.
//
// Audit: a denial is decided first; only then is an event reserved in the ring
// buffer. When the ring buffer is full the event is dropped and counted, and
// the verdict is unchanged, so audit pressure cannot turn a deny into an allow.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD

#define MAX_RANGES 16
#define MAX_PREFIXES 4096

// Hook identifiers reported in events and used as counter indexes.
enum hook {
	HOOK_CONNECT4 = 0,
	HOOK_CONNECT6 = 1,
	HOOK_SENDMSG4 = 2,
	HOOK_SENDMSG6 = 3,
	HOOK_EGRESS = 4,
	HOOK_ABORT = 5,
	HOOK_CANARY = 6,
	HOOK_MAX = 7,
};

// Counter slots: one per hook (denials), then the ring buffer drop count.
#define CNT_RINGBUF_DROP HOOK_MAX
#define CNT_MAX (HOOK_MAX + 1)

// Socket tag flags kept in sk_storage.
#define TAG_OUTBOUND 1 // passed a connect or sendmsg hook of this cgroup
#define TAG_INBOUND 2  // created by accept(2) on a listener of this cgroup

struct port_range {
	__u16 first;
	__u16 last;
};

// Value of an allowlist prefix: the union of the port ranges of every rule
// whose prefix contains this one (user space merges them), because an LPM
// lookup returns only the longest match.
struct allow_val {
	__u32 count;
	struct port_range ranges[MAX_RANGES];
};

struct lpm4_key {
	__u32 prefixlen;
	__u8 addr[4];
};

struct lpm6_key {
	__u32 prefixlen;
	__u8 addr[16];
};

// Run-time configuration, one entry, replaced whole by user space.
struct config {
	__u32 generation; // bumped on every policy change (event de-duplication)
	__u32 canary_ip4; // network order; 0 = no canary armed
	__u16 canary_port; // host order
	__u16 pad;
};

struct sk_tag {
	__u32 flags;
	__u32 pid;
	__u32 reported_generation; // egress denial already reported for this generation
	__u32 pad;
	char comm[16];
};

struct event {
	__u64 ktime_ns;
	__u32 pid;
	__u8 hook;
	__u8 protocol;
	__u16 family;
	__u16 port; // host order
	__u16 pad;
	__u8 addr[16]; // network order; IPv4 in the first four bytes
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MAX_PREFIXES);
	__type(key, struct lpm4_key);
	__type(value, struct allow_val);
} allow4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MAX_PREFIXES);
	__type(key, struct lpm6_key);
	__type(value, struct allow_val);
} allow6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} guard_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sk_tag);
} sk_tags SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

// Size is set by user space before load (Options.AuditBufferSize).
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

// Force BTF for the event type, which no map declares, so bpf2go can emit it.
const struct event *unused_event __attribute__((unused));

static __always_inline void count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &slot);
	if (c)
		*c += 1;
}

static __always_inline int ports_allow(const struct allow_val *v, __u16 port)
{
	__u32 n = v->count;
	for (int i = 0; i < MAX_RANGES; i++) { // bounded loop (Linux 5.3+)
		if (i >= n)
			return 0;
		if (port >= v->ranges[i].first && port <= v->ranges[i].last)
			return 1;
	}
	return 0;
}

// any_port: judge by address only (non-first fragments carry no port).
static __always_inline int allowed4(__u32 ip, __u16 port, int any_port)
{
	struct lpm4_key k = {.prefixlen = 32};
	__builtin_memcpy(k.addr, &ip, 4);
	struct allow_val *v = bpf_map_lookup_elem(&allow4, &k);
	if (!v)
		return 0;
	if (any_port)
		return v->count > 0;
	return ports_allow(v, port);
}

static __always_inline int is_v4mapped(const __u32 ip6[4])
{
	return ip6[0] == 0 && ip6[1] == 0 && ip6[2] == bpf_htonl(0x0000ffff);
}

static __always_inline int allowed6(const __u32 ip6[4], __u16 port, int any_port)
{
	// A v4-mapped destination on a dual-stack socket leaves as IPv4: judge
	// it by the IPv4 allowlist, as the kernel will route it.
	if (is_v4mapped(ip6))
		return allowed4(ip6[3], port, any_port);
	struct lpm6_key k = {.prefixlen = 128};
	__builtin_memcpy(k.addr, ip6, 16);
	struct allow_val *v = bpf_map_lookup_elem(&allow6, &k);
	if (!v)
		return 0;
	if (any_port)
		return v->count > 0;
	return ports_allow(v, port);
}

static __always_inline struct config *get_config(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&guard_config, &zero);
}

static __always_inline void report(__u8 hook, __u16 family, const void *addr,
				   __u16 port, __u8 protocol, const struct sk_tag *tag)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(CNT_RINGBUF_DROP);
		return;
	}
	e->ktime_ns = bpf_ktime_get_ns();
	e->hook = hook;
	e->protocol = protocol;
	e->family = family;
	e->port = port;
	e->pad = 0;
	__builtin_memset(e->addr, 0, sizeof(e->addr));
	if (family == AF_INET)
		__builtin_memcpy(e->addr, addr, 4);
	else
		__builtin_memcpy(e->addr, addr, 16);
	if (tag) {
		// Attribute the packet to the task that connected the socket: the
		// task running when a packet leaves may be unrelated (softirq,
		// retransmit timer).
		e->pid = tag->pid;
		__builtin_memcpy(e->comm, tag->comm, sizeof(e->comm));
	} else {
		e->pid = bpf_get_current_pid_tgid() >> 32;
		bpf_get_current_comm(e->comm, sizeof(e->comm));
	}
	bpf_ringbuf_submit(e, 0);
}

static __always_inline void tag_outbound(struct bpf_sock *sk)
{
	if (!sk)
		return;
	struct sk_tag *t = bpf_sk_storage_get(&sk_tags, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!t)
		return; // untagged sockets are judged as outbound: fail closed
	t->flags |= TAG_OUTBOUND;
	t->pid = bpf_get_current_pid_tgid() >> 32;
	bpf_get_current_comm(t->comm, sizeof(t->comm));
}

static __always_inline int canary4(__u32 ip, __u16 port)
{
	struct config *c = get_config();
	return c && c->canary_ip4 != 0 && c->canary_ip4 == ip && c->canary_port == port;
}

static __always_inline int sock_addr4(struct bpf_sock_addr *ctx, __u8 hook)
{
	__u32 ip = ctx->user_ip4;
	__u16 port = bpf_ntohs((__u16)ctx->user_port);
	__u8 proto = ctx->protocol;

	if (canary4(ip, port)) {
		count(HOOK_CANARY);
		report(HOOK_CANARY, AF_INET, &ip, port, proto, 0);
		return 0;
	}
	if (allowed4(ip, port, 0)) {
		tag_outbound(ctx->sk);
		return 1;
	}
	count(hook);
	report(hook, AF_INET, &ip, port, proto, 0);
	return 0;
}

static __always_inline int sock_addr6(struct bpf_sock_addr *ctx, __u8 hook)
{
	__u32 ip6[4];
	ip6[0] = ctx->user_ip6[0];
	ip6[1] = ctx->user_ip6[1];
	ip6[2] = ctx->user_ip6[2];
	ip6[3] = ctx->user_ip6[3];
	__u16 port = bpf_ntohs((__u16)ctx->user_port);
	__u8 proto = ctx->protocol;

	if (allowed6(ip6, port, 0)) {
		tag_outbound(ctx->sk);
		return 1;
	}
	count(hook);
	report(hook, AF_INET6, ip6, port, proto, 0);
	return 0;
}

SEC("cgroup/connect4")
int guard_connect4(struct bpf_sock_addr *ctx)
{
	return sock_addr4(ctx, HOOK_CONNECT4);
}

SEC("cgroup/connect6")
int guard_connect6(struct bpf_sock_addr *ctx)
{
	return sock_addr6(ctx, HOOK_CONNECT6);
}

SEC("cgroup/sendmsg4")
int guard_sendmsg4(struct bpf_sock_addr *ctx)
{
	return sock_addr4(ctx, HOOK_SENDMSG4);
}

SEC("cgroup/sendmsg6")
int guard_sendmsg6(struct bpf_sock_addr *ctx)
{
	return sock_addr6(ctx, HOOK_SENDMSG6);
}

SEC("sockops")
int guard_sockops(struct bpf_sock_ops *ops)
{
	if (ops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB)
		return 1;
	struct bpf_sock *sk = ops->sk;
	if (!sk)
		return 1;
	struct sk_tag *t = bpf_sk_storage_get(&sk_tags, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (t)
		t->flags |= TAG_INBOUND;
	return 1;
}

struct iphdr_min {
	__u8 ver_ihl;
	__u8 tos;
	__u16 tot_len;
	__u16 id;
	__u16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__u16 check;
	__u32 saddr;
	__u32 daddr;
};

struct ipv6hdr_min {
	__u32 ver_tc_flow;
	__u16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	__u32 saddr[4];
	__u32 daddr[4];
};

#define IPV6_HOPOPTS 0
#define IPV6_ROUTING 43
#define IPV6_FRAGMENT 44
#define IPV6_DSTOPTS 60

static __always_inline void egress_deny(struct sk_tag *tag, __u16 family,
					const void *addr, __u16 port, __u8 proto)
{
	count(HOOK_EGRESS);
	// A dropped TCP segment is retransmitted many times: report one event
	// per socket and policy generation, count every drop.
	if (tag) {
		struct config *c = get_config();
		__u32 gen = c ? c->generation : 0;
		if (tag->reported_generation == gen + 1)
			return;
		tag->reported_generation = gen + 1;
	}
	report(HOOK_EGRESS, family, addr, port, proto, tag);
}

SEC("cgroup_skb/egress")
int guard_egress(struct __sk_buff *skb)
{
	struct sk_tag *tag = 0;
	struct bpf_sock *sk = skb->sk;
	if (sk) {
		// The kernel runs this hook for full sockets only, and presents a
		// SYN-ACK of a request socket as sent by its listener. A listener
		// sends nothing else: let its SYN-ACKs answer inbound SYNs.
		struct bpf_sock *full = bpf_sk_fullsock(sk);
		if (!full)
			return 1; // minisockets carry no application payload
		if (full->state == BPF_TCP_LISTEN)
			return 1;
		tag = bpf_sk_storage_get(&sk_tags, full, 0, 0);
		if (tag && (tag->flags & TAG_INBOUND))
			return 1;
	}

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr_min ip;
		if (bpf_skb_load_bytes(skb, 0, &ip, sizeof(ip)))
			goto deny_unparsed;
		__u16 port = 0;
		int any_port = 0;
		__u16 frag = bpf_ntohs(ip.frag_off) & 0x1fff;
		if (frag != 0) {
			any_port = 1; // no transport header in a later fragment
		} else if (ip.protocol == IPPROTO_TCP || ip.protocol == IPPROTO_UDP) {
			__u32 off = (ip.ver_ihl & 0x0f) * 4;
			__u16 dport;
			if (bpf_skb_load_bytes(skb, off + 2, &dport, sizeof(dport)))
				goto deny_unparsed;
			port = bpf_ntohs(dport);
		}
		if (allowed4(ip.daddr, port, any_port))
			return 1;
		egress_deny(tag, AF_INET, &ip.daddr, port, ip.protocol);
		return 0;
	}

	if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr_min ip6;
		if (bpf_skb_load_bytes(skb, 0, &ip6, sizeof(ip6)))
			goto deny_unparsed;
		__u8 next = ip6.nexthdr;
		__u32 off = sizeof(ip6);
		int any_port = 0;
		__u16 port = 0;
		for (int i = 0; i < 4; i++) {
			if (next == IPV6_HOPOPTS || next == IPV6_ROUTING || next == IPV6_DSTOPTS) {
				__u8 h[2];
				if (bpf_skb_load_bytes(skb, off, h, sizeof(h)))
					goto deny_unparsed;
				next = h[0];
				off += ((__u32)h[1] + 1) * 8;
			} else if (next == IPV6_FRAGMENT) {
				__u8 h[4];
				if (bpf_skb_load_bytes(skb, off, h, sizeof(h)))
					goto deny_unparsed;
				next = h[0];
				off += 8;
				if (((((__u16)h[2]) << 8 | h[3]) & 0xfff8) != 0)
					any_port = 1;
			} else {
				break;
			}
		}
		if (!any_port && (next == IPPROTO_TCP || next == IPPROTO_UDP)) {
			__u16 dport;
			if (bpf_skb_load_bytes(skb, off + 2, &dport, sizeof(dport)))
				goto deny_unparsed;
			port = bpf_ntohs(dport);
		}
		if (allowed6(ip6.daddr, port, any_port))
			return 1;
		egress_deny(tag, AF_INET6, ip6.daddr, port, next);
		return 0;
	}

	// Not IP (cannot happen on the inet egress path): nothing to judge.
	return 1;

deny_unparsed:
	count(HOOK_EGRESS);
	return 0;
}

// ---- sweep: abort outbound TCP connections whose destination left the policy

// Minimal kernel types, relocated against the running kernel's BTF (CO-RE),
// so the object needs no vmlinux.h.
struct in6_addr___k {
	union {
		__u8 u6_addr8[16];
		__u32 u6_addr32[4];
	} in6_u;
} __attribute__((preserve_access_index));

struct sock_common {
	__u32 skc_daddr;
	__u16 skc_dport;
	__u16 skc_family;
	volatile unsigned char skc_state;
	struct in6_addr___k skc_v6_daddr;
} __attribute__((preserve_access_index));

struct bpf_iter_meta;
struct bpf_iter__tcp {
	struct bpf_iter_meta *meta;
	struct sock_common *sk_common;
} __attribute__((preserve_access_index));

extern int bpf_sock_destroy(struct sock_common *sk) __ksym;

#define TCP_LISTEN 10
#define TCP_CLOSE 7
#define TCP_TIME_WAIT 6
#define TCP_NEW_SYN_RECV 12

SEC("iter/tcp")
int guard_sweep_tcp(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	if (!skc)
		return 0;
	unsigned char state = skc->skc_state;
	if (state == TCP_LISTEN || state == TCP_CLOSE || state == TCP_TIME_WAIT ||
	    state == TCP_NEW_SYN_RECV)
		return 0;
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0;
	struct sk_tag *tag = bpf_sk_storage_get(&sk_tags, tp, 0, 0);
	// Only sockets of this guard's cgroup carry a tag in this map.
	if (!tag || !(tag->flags & TAG_OUTBOUND) || (tag->flags & TAG_INBOUND))
		return 0;

	__u16 port = bpf_ntohs(skc->skc_dport);
	__u16 family = skc->skc_family;
	if (family == AF_INET) {
		__u32 ip = skc->skc_daddr;
		if (allowed4(ip, port, 0))
			return 0;
		bpf_sock_destroy(skc);
		count(HOOK_ABORT);
		report(HOOK_ABORT, AF_INET, &ip, port, IPPROTO_TCP, tag);
		return 0;
	}
	if (family == AF_INET6) {
		__u32 ip6[4];
		ip6[0] = skc->skc_v6_daddr.in6_u.u6_addr32[0];
		ip6[1] = skc->skc_v6_daddr.in6_u.u6_addr32[1];
		ip6[2] = skc->skc_v6_daddr.in6_u.u6_addr32[2];
		ip6[3] = skc->skc_v6_daddr.in6_u.u6_addr32[3];
		if (allowed6(ip6, port, 0))
			return 0;
		bpf_sock_destroy(skc);
		count(HOOK_ABORT);
		report(HOOK_ABORT, AF_INET6, ip6, port, IPPROTO_TCP, tag);
	}
	return 0;
}
