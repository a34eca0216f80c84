#ifndef GLASSES_TEST_NETGUARD_H
#define GLASSES_TEST_NETGUARD_H
// Test-only: the network guard every test process runs under (netguard.c starts it before
// the first test; Tests/Support/NetworkGuard.swift reads it). Never part of a product.

/// The folder the guard's proxy logs into (attempts.jsonl; the runner adds spawns.tsv and
/// claimed), or NULL when the guard did not start.
const char *glasses_netguard_directory(void);

/// Why the guard did not start (connections then fail at a port nothing listens on), or
/// NULL when it runs.
const char *glasses_netguard_problem(void);

#endif
