"""What a backend puts on the host beside its sandboxes, with nothing of any engine in it:
any backend whose sandboxes' traffic crosses this host's firewall may use it (Docker's
does; a Firecracker backend's tap devices would), and none need copy it.

- `owner`: the labels naming the server process that owns a sandbox, a network, a rule
  or a proxy (host, pid namespace, pid, its start time), and whether that owner died;
- `egress`: the egress guard's iptables chains for a bridge (`EgressRules`), their owner
  comments, and the sweep of dead servers' rules;
- `proxy`: an allow-listed sandbox's squid (`EgressProxy`) and the sweep of dead
  servers' proxies; `allowlist`: the INPUT rules and proxies of an allow-list bridge
  (`ProxyGate`) and a sandbox's proxy variables;
- `state`: sweeping both (`sweep_guard`) and proving the guard (`check_guard`);
  `checks`: `orsbox doctor`'s network checks built on them.

The backend keeps what speaks to its engine: making the bridge and its networks
(Docker: `orsbox.sandbox.docker.guarded`, `orsbox.sandbox.docker.allowlist`) and sweeping
them. docs/network.md describes the guard.
"""
