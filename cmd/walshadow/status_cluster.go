package main

// This file owns the NODES section of `walshadow status`: for a
// clickhouse_ddl output that names a cluster, each node of the cluster as
// a direct connection finds it (up or down, version, macros, its
// replication queue and delay for the output's database). ClickHouse
// being away is reported, never a reason for status to fail.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"gopkg.in/yaml.v3"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// statusConnTimeouts bound the connection to the DSN's server: status
// looks, it must not hang on a server that does not answer.
const (
	statusCHDialTimeout = 3 * time.Second
	statusCHReadTimeout = 5 * time.Second
)

// clusterTarget is a clickhouse_ddl output of the config that names a
// cluster.
type clusterTarget struct {
	conn     clickhouse.ConnConfig
	database string // "" is the DSN's
}

// clusterStatus is what status found of one clusterTarget.
type clusterStatus struct {
	cluster  string
	database string
	// err: the DSN's server was not reached, or its system.clusters
	// refused (unknown cluster, shards of several replicas).
	err   error
	nodes []clickhouse.NodeFacts
}

// clusterTargets reads the clickhouse_ddl outputs of the pipeline config
// at path that follow session label and name a cluster. ${ENV} is
// interpolated as readPipelineSession does it (a variable not set reads
// as empty), so a config status can read never fails here for want of a
// variable the cluster does not need.
func clusterTargets(path, label string) ([]clusterTarget, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the pipeline config: %w", err)
	}
	q := service.GlobalEnvironment().FullConfigSchema(Version, DateBuilt).NewConfigQuerier()
	file, err := q.ParseYAML(string(b))
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	var outputs []outputCheck
	for _, section := range []string{"output", "output_resources"} {
		field, err := file.FieldAtPath(section)
		if err != nil {
			continue // the config has no such section
		}
		// FieldAny holds yaml nodes (a list of them, for a list): the
		// YAML round trip makes them the plain maps collectOutputs reads.
		v, err := field.FieldAny()
		var text []byte
		if err == nil {
			text, err = yaml.Marshal(v)
		}
		var plain any
		if err == nil {
			err = yaml.Unmarshal(text, &plain)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, section, err)
		}
		collectOutputs(plain, &outputs)
	}
	var out []clusterTarget
	for _, o := range outputs {
		if o.bad == nil && o.conn.Cluster != "" && (o.session == label || o.session == "") {
			out = append(out, clusterTarget{conn: o.conn, database: o.database})
		}
	}
	return out, nil
}

// startClusterStatus reads every target beside the rest of status (ctx
// bounds it) and returns the wait for the result.
func startClusterStatus(ctx context.Context, targets []clusterTarget) func() []clusterStatus {
	done := make(chan []clusterStatus, 1)
	go func() {
		out := make([]clusterStatus, len(targets))
		for i, t := range targets {
			out[i] = readClusterStatus(ctx, t)
		}
		done <- out
	}()
	return func() []clusterStatus { return <-done }
}

// readClusterStatus reads the cluster's nodes from the DSN's server's
// system.clusters, then each node directly.
func readClusterStatus(ctx context.Context, t clusterTarget) clusterStatus {
	s := clusterStatus{cluster: t.conn.Cluster, database: t.database}
	cfg := t.conn
	cfg.DialTimeout, cfg.ReadTimeout = statusCHDialTimeout, statusCHReadTimeout
	conn, err := clickhouse.Open(ctx, cfg)
	if err != nil {
		// Open's errors name the hosts and user, never the password.
		s.err = err
		return s
	}
	defer conn.Close()
	if s.database == "" {
		s.database = conn.Database()
	}
	s.nodes = clickhouse.ReadNodes(ctx, cfg, conn.Topology(), s.database)
	return s
}

// writeNodes prints a NODES section per cluster output: each node with
// its shard and replica (system.clusters' numbers, then its macros), its
// version, its replication queue and delay for the output's database, and
// whether it is up.
func (r *statusReport) writeNodes(w io.Writer) {
	if r.clustersErr != nil {
		fmt.Fprintf(w, "\nNODES\t? the clickhouse_ddl outputs: %s\n", cell(clickhouse.ErrorLine(r.clustersErr)))
	}
	for _, c := range r.clusters {
		head := fmt.Sprintf("cluster %s", clickhouse.QuoteIdent(c.cluster))
		if c.database != "" {
			head += fmt.Sprintf(", database %s", clickhouse.QuoteIdent(c.database))
		}
		if c.err != nil {
			fmt.Fprintf(w, "\nNODES\t%s: ClickHouse not reached: %s\n", cell(head), cell(clickhouse.ErrorLine(c.err)))
			continue
		}
		fmt.Fprintf(w, "\nNODES\t%s: %d node(s); QUEUE is the replication entries a node has yet to apply, DELAY how far its most behind table is\n", cell(head), len(c.nodes))
		fmt.Fprintln(w, "NODE\tSHARD\tREPLICA\tMACROS\tVERSION\tQUEUE\tDELAY\tSTATE")
		for _, f := range c.nodes {
			macros, version, queue, delay := "-", "-", "-", "-"
			if f.Err == nil {
				macros = fmt.Sprintf("shard=%s replica=%s", f.Macros["shard"], f.Macros["replica"])
				version = f.Version
				queue = fmt.Sprint(f.ReplicationQueue)
				delay = roundDuration(f.MaxDelay)
			}
			fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", cell(f.Node.Addr()), f.Node.Shard, f.Node.Replica,
				cell(macros), cell(version), queue, delay, cell(nodeState(f)))
		}
	}
}

// nodeState is "up" with what the node holds, or why it is not.
func nodeState(f clickhouse.NodeFacts) string {
	if f.Err != nil {
		return "DOWN: " + clickhouse.ErrorLine(f.Err)
	}
	state := fmt.Sprintf("up, %d table(s)", f.Tables)
	if f.ReadOnly > 0 {
		state += fmt.Sprintf(", %d read-only (no ZooKeeper session)", f.ReadOnly)
	}
	if zk := f.ZooKeeperErr; zk != nil {
		// The node's own words, without the node named again.
		if cause := errors.Unwrap(zk); cause != nil {
			zk = cause
		}
		state += "; ZooKeeper: " + clickhouse.ErrorLine(zk)
	}
	return state
}
