package openstack

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// octaviaSeed fills the real Octavia with many converged load balancers
// quickly. Octavia's API on the test stack creates a few load balancers a
// minute at most (each is five worker flows), so one template Service is
// converged through the API and its rows (load balancer, VIP, listener,
// pool, members, monitor, tags) are cloned in Octavia's database, as
// setError writes there. Octavia's API then serves the clones like any
// other load balancer; the clones never reach its worker, and are removed
// from the database again at cleanup.
type octaviaSeed struct {
	columns map[string][]string
	cloned  []string // load-balancer IDs
}

// seedLoadBalancers converges a template Service named prefix-0 through c
// and clones it into n-1 more (prefix-1 ...), returning all n Services.
func seedLoadBalancers(t testing.TB, c *Cloud, prefix string, n int, nodes []*corev1.Node) []*corev1.Service {
	t.Helper()
	svcs := make([]*corev1.Service, n)
	for i := range svcs {
		svcs[i] = newService(fmt.Sprintf("%s-%d", prefix, i))
	}
	ensureConverged(t, c.lb, svcs[0], nodes)
	t.Cleanup(func() { deleteConverged(t, c.lb, svcs[0]) })
	seed := &octaviaSeed{columns: map[string][]string{}}
	tpl := seed.template(t, c, svcs[0])
	var sql strings.Builder
	sql.WriteString("BEGIN;\n")
	for _, svc := range svcs[1:] {
		seed.clone(t, &sql, tpl, c.lb.lbName(svc), c.lb.tags(svc))
	}
	sql.WriteString("COMMIT;\n")
	t.Cleanup(func() { seed.remove(t) })
	seed.exec(t, sql.String())
	return svcs
}

// seedTemplate are the IDs of the template's rows.
type seedTemplate struct {
	lb, listener, pool, monitor string
	members                     []string
}

func (s *octaviaSeed) template(t testing.TB, c *Cloud, svc *corev1.Service) seedTemplate {
	t.Helper()
	ctx := context.Background()
	sc, err := c.lb.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found, err := c.lb.find(ctx, sc, svc)
	if err != nil || len(found) != 1 {
		t.Fatalf("template load balancer: %d, %v", len(found), err)
	}
	st, err := readState(ctx, sc.loadBalancer, found[0].ID)
	if err != nil || len(st.listeners) != 1 || len(st.pools) != 1 {
		t.Fatalf("template state %+v, %v: want one listener and one pool", st, err)
	}
	tpl := seedTemplate{lb: found[0].ID, listener: st.listeners[0].ID, pool: st.listeners[0].DefaultPoolID}
	p := st.pools[tpl.pool]
	if p == nil || p.monitor == nil {
		t.Fatalf("template pool %s: want it with a monitor", tpl.pool)
	}
	tpl.monitor = p.monitor.ID
	for _, m := range p.members {
		tpl.members = append(tpl.members, m.ID)
	}
	return tpl
}

// clone writes the SQL copying the template under a new name and tags.
func (s *octaviaSeed) clone(t testing.TB, sql *strings.Builder, tpl seedTemplate, name string, tags []string) {
	lb, listener, pool := newUUID(t), newUUID(t), newUUID(t)
	s.cloned = append(s.cloned, lb)
	s.copyRow(t, sql, "load_balancer", "id", tpl.lb, map[string]string{"id": lb, "name": name})
	s.copyRow(t, sql, "vip", "load_balancer_id", tpl.lb, map[string]string{"load_balancer_id": lb, "port_id": newUUID(t)})
	s.copyRow(t, sql, "pool", "id", tpl.pool, map[string]string{"id": pool, "load_balancer_id": lb})
	s.copyRow(t, sql, "listener", "id", tpl.listener, map[string]string{"id": listener, "load_balancer_id": lb, "default_pool_id": pool})
	for _, m := range tpl.members {
		s.copyRow(t, sql, "member", "id", m, map[string]string{"id": newUUID(t), "pool_id": pool})
	}
	s.copyRow(t, sql, "health_monitor", "id", tpl.monitor, map[string]string{"id": newUUID(t), "pool_id": pool})
	for _, tag := range tags {
		fmt.Fprintf(sql, "INSERT INTO tags (resource_id, tag) VALUES ('%s', '%s');\n", lb, tag)
	}
}

// copyRow writes an INSERT ... SELECT copying one row with some columns
// set to new values.
func (s *octaviaSeed) copyRow(t testing.TB, sql *strings.Builder, table, key, id string, set map[string]string) {
	cols := s.tableColumns(t, table)
	names := make([]string, len(cols))
	exprs := make([]string, len(cols))
	for i, col := range cols {
		names[i] = "`" + col + "`"
		exprs[i] = names[i]
		if v, ok := set[col]; ok {
			exprs[i] = "'" + v + "'"
		}
	}
	fmt.Fprintf(sql, "INSERT INTO %s (%s) SELECT %s FROM %s WHERE %s = '%s';\n", table, strings.Join(names, ", "), strings.Join(exprs, ", "), table, key, id)
}

// tableColumns reads a table's columns from the database once.
func (s *octaviaSeed) tableColumns(t testing.TB, table string) []string {
	if cols, ok := s.columns[table]; ok {
		return cols
	}
	out := s.exec(t, "SELECT column_name FROM information_schema.columns WHERE table_schema = 'octavia' AND table_name = '"+table+"' ORDER BY ordinal_position;")
	cols := strings.Fields(out)
	if len(cols) == 0 {
		t.Fatalf("Octavia's database has no table %s", table)
	}
	s.columns[table] = cols
	return cols
}

// remove deletes the clones' rows.
func (s *octaviaSeed) remove(t testing.TB) {
	if len(s.cloned) == 0 {
		return
	}
	ids := "'" + strings.Join(s.cloned, "', '") + "'"
	pools := "SELECT id FROM pool WHERE load_balancer_id IN (" + ids + ")"
	s.exec(t, "BEGIN;\n"+
		"DELETE FROM member WHERE pool_id IN ("+pools+");\n"+
		"DELETE FROM health_monitor WHERE pool_id IN ("+pools+");\n"+
		"DELETE FROM listener WHERE load_balancer_id IN ("+ids+");\n"+
		"DELETE FROM pool WHERE load_balancer_id IN ("+ids+");\n"+
		"DELETE FROM vip WHERE load_balancer_id IN ("+ids+");\n"+
		"DELETE FROM tags WHERE resource_id IN ("+ids+");\n"+
		"DELETE FROM load_balancer WHERE id IN ("+ids+");\n"+
		"COMMIT;\n")
}

// exec runs SQL on Octavia's database.
func (s *octaviaSeed) exec(t testing.TB, sql string) string {
	t.Helper()
	return octaviaSQL(t, sql)
}

// newUUID returns a random UUID, as Octavia's IDs are.
func newUUID(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
