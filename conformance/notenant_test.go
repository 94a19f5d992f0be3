package conformance

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
)

// Mattermost's shape (from a new-user probe): a direct-message channel
// belongs to no team and holds the empty string in team_id (not NULL).
// No grant can name "" (scope.ValidID), so such rows are in no tenant's
// scope; the suite took "" for a tenant's id and could not start (default
// tenants) or stopped in properties 45 and 46. Now the correct declaration
// passes every property on every engine, the team-less channel and its post
// invisible to every team.
func TestEmptyLevelValueIsNoTenant(t *testing.T) {
	ddl := func(Engine) []string {
		return []string{
			`CREATE TABLE teams (id VARCHAR(26) PRIMARY KEY, name VARCHAR(40) NOT NULL)`,
			`CREATE TABLE channels (id VARCHAR(26) PRIMARY KEY, team_id VARCHAR(26) NOT NULL, name VARCHAR(40) NOT NULL)`,
			`CREATE TABLE posts (id VARCHAR(26) PRIMARY KEY, channel_id VARCHAR(26) NOT NULL REFERENCES channels(id), message VARCHAR(80) NOT NULL)`,
		}
	}
	d := map[string][]Row{}
	for i := 1; i <= 3; i++ {
		team := fmt.Sprintf("team%d", i)
		d["teams"] = append(d["teams"], Row{"id": team, "name": "Team " + team})
		for k := 0; k < 2; k++ {
			ch := fmt.Sprintf("ch%d", i+3*k) // interleaved across teams
			d["channels"] = append(d["channels"], Row{"id": ch, "team_id": team, "name": "town square " + ch})
			d["posts"] = append(d["posts"], Row{"id": "p" + ch, "channel_id": ch, "message": "secret of " + team + " in " + ch})
		}
	}
	d["channels"] = append(d["channels"], Row{"id": "dm1", "team_id": "", "name": "alice__bob"})
	d["posts"] = append(d["posts"], Row{"id": "pdm1", "channel_id": "dm1", "message": "a direct message"})
	def := builder.SchemaDef{
		Levels: []builder.Level{{Name: "team", Key: builder.TextKey}},
		Tables: []builder.TableDef{
			{Name: "teams", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "team"}},
			{Name: "channels", Columns: []string{"id", "team_id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"team_id": "team"}},
			{Name: "posts", Columns: []string{"id", "channel_id", "message"}, PrimaryKey: []string{"id"}, Parent: "channel_id",
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"channel_id"}, RefTable: "channels"}}},
		},
	}
	seed := seedShape(ddl, d, []string{"teams", "channels", "posts"})
	forEachDSN(t, func(t *testing.T, dsn string) {
		tg := Target{Name: "chat-dm", DSN: dsn, Graph: def, Seed: func(ctx context.Context, db *sql.DB, e Engine) (*Dataset, error) { return seed(ctx, db, e) }}
		out, err := runSome(t, tg)
		if err != nil {
			t.Fatalf("setup: %v", err)
		}
		ran := 0
		for id, o := range out {
			if o.failed {
				t.Errorf("P%02d failed: %q", id, o.msgs)
			}
			if o.skip == "" {
				ran++
			}
		}
		if ran < 20 {
			t.Fatalf("only %d properties ran", ran)
		}
	})
}

// Mattermost ships no foreign keys (a new-user probe): a table whose rows
// reach a team only through a column such as channelid, declared global
// with a GlobalReason, let every team read every team's posts and passed
// every property, the catalog oracle attributing rows by constraints
// alone. Property 58 now follows a global table's columns named like a
// reference (channelid, ChannelId, channel_id) that no foreign key covers
// and fails, naming the columns it followed; a global table whose like-named
// column matches no tenant's key (a client's own ids) still passes.
func TestImpliedReferencesWithoutForeignKeys(t *testing.T) {
	ddl := func(Engine) []string {
		return []string{
			`CREATE TABLE teams (id VARCHAR(26) PRIMARY KEY, name VARCHAR(40) NOT NULL)`,
			`CREATE TABLE channels (id VARCHAR(26) PRIMARY KEY, team_id VARCHAR(26) NOT NULL, name VARCHAR(40) NOT NULL)`,
			`CREATE TABLE posts (id VARCHAR(26) PRIMARY KEY, channelid VARCHAR(26) NOT NULL, message VARCHAR(80) NOT NULL)`,
			`CREATE TABLE emoji (id VARCHAR(26) PRIMARY KEY, clientid VARCHAR(26) NOT NULL, name VARCHAR(40) NOT NULL)`,
			`CREATE TABLE clients (id VARCHAR(26) PRIMARY KEY, name VARCHAR(40) NOT NULL)`,
		}
	}
	d := map[string][]Row{}
	for i := 1; i <= 3; i++ {
		team := fmt.Sprintf("team%d", i)
		d["teams"] = append(d["teams"], Row{"id": team, "name": "Team " + team})
		d["channels"] = append(d["channels"], Row{"id": fmt.Sprintf("ch%d", i), "team_id": team, "name": "town square"})
		d["posts"] = append(d["posts"], Row{"id": fmt.Sprintf("p%d", i), "channelid": fmt.Sprintf("ch%d", i), "message": "secret of " + team})
		d["clients"] = append(d["clients"], Row{"id": fmt.Sprintf("c%d", i), "name": "web"})
		d["emoji"] = append(d["emoji"], Row{"id": fmt.Sprintf("e%d", i), "clientid": fmt.Sprintf("c%d", i), "name": "party"})
	}
	def := builder.SchemaDef{
		Levels: []builder.Level{{Name: "team", Key: builder.TextKey}},
		Tables: []builder.TableDef{
			{Name: "teams", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "team"}},
			{Name: "channels", Columns: []string{"id", "team_id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"team_id": "team"}},
			{Name: "posts", Columns: []string{"id", "channelid", "message"}, PrimaryKey: []string{"id"}, Global: true,
				GlobalReason: "no foreign keys: posts reach a team only through channelid"},
			{Name: "emoji", Columns: []string{"id", "clientid", "name"}, PrimaryKey: []string{"id"}, Global: true, GlobalReason: "custom emoji are the server's"},
			{Name: "clients", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Global: true},
		},
	}
	seed := seedShape(ddl, d, []string{"teams", "channels", "posts", "clients", "emoji"})
	forEachDSN(t, func(t *testing.T, dsn string) {
		tg := Target{Name: "chat-nofk", DSN: dsn, Graph: def, Seed: func(ctx context.Context, db *sql.DB, e Engine) (*Dataset, error) { return seed(ctx, db, e) }}
		out, err := runSome(t, tg, 58)
		if err != nil {
			t.Fatalf("setup (the declaration opens: it gives its reason): %v", err)
		}
		o := out[58]
		all := strings.Join(o.msgs, "\n")
		if !o.failed || !strings.Contains(all, "posts (declared global") || !strings.Contains(all, "posts.channelid -> channels, named like references with no foreign key") {
			t.Fatalf("P58: failed=%v %q; want posts named, through posts.channelid", o.failed, o.msgs)
		}
		if strings.Contains(all, "emoji (declared") {
			t.Errorf("P58 attributed emoji (clientid names a global table's key) to tenants: %q", o.msgs)
		}
	})
}
