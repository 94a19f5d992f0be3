package conformance

// A chat schema in Zulip's shape (tenant = realm), from a new-user probe:
// recipients owned by reference (the subscriptions and messages that point
// at them decide whose they are), huddles reached only through a recipient,
// messages carrying their realm_id beside a sender that may be another
// realm's bot (Zulip's cross-realm notification bot sends into every
// realm), and attachments with a stored realm_id. Three realms, ids
// interleaved. The correct declaration passes; each mistake the probe found
// passing Open and the whole suite while leaking now fails the property
// named.

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

func chatDDL(Engine) []string {
	return []string{
		`CREATE TABLE realms (id INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL)`,
		`CREATE TABLE users (id INTEGER PRIMARY KEY, realm_id INTEGER NOT NULL REFERENCES realms(id), email VARCHAR(60) NOT NULL)`,
		`CREATE TABLE recipients (id INTEGER PRIMARY KEY, kind INTEGER NOT NULL, type_id INTEGER NOT NULL)`,
		`CREATE TABLE subscriptions (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), recipient_id INTEGER NOT NULL REFERENCES recipients(id))`,
		`CREATE TABLE huddles (id INTEGER PRIMARY KEY, huddle_hash VARCHAR(60) NOT NULL, recipient_id INTEGER NULL REFERENCES recipients(id))`,
		`CREATE TABLE messages (id INTEGER PRIMARY KEY, realm_id INTEGER NOT NULL REFERENCES realms(id), sender_id INTEGER NOT NULL REFERENCES users(id),
			recipient_id INTEGER NOT NULL REFERENCES recipients(id), content VARCHAR(80) NOT NULL)`,
		`CREATE TABLE attachments (id INTEGER PRIMARY KEY, owner_id INTEGER NOT NULL REFERENCES users(id), realm_id INTEGER NOT NULL, path VARCHAR(60) NOT NULL)`,
	}
}

var chatOrder = []string{"realms", "users", "recipients", "subscriptions", "huddles", "messages", "attachments"}

func chatData() map[string][]Row {
	i := func(v int64) any { return v }
	d := map[string][]Row{}
	for r := int64(1); r <= 3; r++ {
		d["realms"] = append(d["realms"], Row{"id": i(r), "name": "realm" + string(rune('0'+r))})
		for k := int64(0); k < 2; k++ {
			u := r + 3*k // realm r holds the ids r, r+3, …
			d["users"] = append(d["users"], Row{"id": i(u), "realm_id": i(r), "email": "u" + string(rune('0'+u)) + "@x"})
			d["attachments"] = append(d["attachments"], Row{"id": i(u), "owner_id": i(u), "realm_id": i(r), "path": "p/" + string(rune('0'+u))})
		}
		rec := 10 + r // realm r's huddle recipient
		d["recipients"] = append(d["recipients"], Row{"id": i(rec), "kind": i(3), "type_id": i(r)})
		d["huddles"] = append(d["huddles"], Row{"id": i(r), "huddle_hash": "hash-r" + string(rune('0'+r)), "recipient_id": i(rec)})
		d["subscriptions"] = append(d["subscriptions"], Row{"id": i(r), "user_id": i(r), "recipient_id": i(rec)},
			Row{"id": i(r + 3), "user_id": i(r + 3), "recipient_id": i(rec)})
		d["messages"] = append(d["messages"], Row{"id": i(r), "realm_id": i(r), "sender_id": i(r), "recipient_id": i(rec), "content": "secret of realm " + string(rune('0'+r))})
	}
	// Realm 3's bot (user 3) sent message 7 into realm 1, to realm 1's
	// huddle recipient.
	d["messages"] = append(d["messages"], Row{"id": i(7), "realm_id": i(1), "sender_id": i(3), "recipient_id": i(11), "content": "bot notice for realm 1"})
	return d
}

// chatDef is the correct declaration: huddles left out (reached only
// through recipients, owned by reference: no declaration fits them).
func chatDef() builder.SchemaDef {
	fk := func(col, ref string) builder.ForeignKey {
		return builder.ForeignKey{Columns: []string{col}, RefTable: ref}
	}
	return builder.SchemaDef{
		Levels: []builder.Level{{Name: "realm", Key: builder.IntKey}},
		Tables: []builder.TableDef{
			{Name: "realms", Columns: []string{"id", "name"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"id": "realm"}},
			{Name: "users", Columns: []string{"id", "realm_id", "email"}, PrimaryKey: []string{"id"}, Levels: map[string]string{"realm_id": "realm"},
				ForeignKeys: []builder.ForeignKey{fk("realm_id", "realms")}},
			{Name: "recipients", Columns: []string{"id", "kind", "type_id"}, PrimaryKey: []string{"id"}, OwnedByReference: true},
			{Name: "subscriptions", Columns: []string{"id", "user_id", "recipient_id"}, PrimaryKey: []string{"id"}, Parent: "user_id",
				ForeignKeys: []builder.ForeignKey{fk("user_id", "users"), fk("recipient_id", "recipients")}},
			{Name: "messages", Columns: []string{"id", "realm_id", "sender_id", "recipient_id", "content"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"realm_id": "realm"}, Parent: "realm_id",
				ForeignKeys: []builder.ForeignKey{fk("realm_id", "realms"), fk("sender_id", "users"), fk("recipient_id", "recipients")}},
			{Name: "attachments", Columns: []string{"id", "owner_id", "realm_id", "path"}, PrimaryKey: []string{"id"},
				Levels: map[string]string{"realm_id": "realm"}, ForeignKeys: []builder.ForeignKey{fk("owner_id", "users")}},
		},
	}
}

// chatTarget seeds every table and gives the suite the rows of the tables
// def declares (a table left out is the database's alone).
func chatTarget(dsn string, def builder.SchemaDef) Target {
	seed := seedShape(chatDDL, chatData(), chatOrder)
	return Target{Name: "chat", DSN: dsn, Graph: def, Seed: func(ctx context.Context, db *sql.DB, e Engine) (*Dataset, error) {
		d, err := seed(ctx, db, e)
		if err != nil {
			return nil, err
		}
		for name := range d.Tables {
			if !slices.ContainsFunc(def.Tables, func(td builder.TableDef) bool { return td.Name == name }) {
				delete(d.Tables, name)
			}
		}
		return d, nil
	}}
}

// chatEdit returns chatDef with fn applied to the named table (appended
// when absent).
func chatEdit(name string, fn func(td *builder.TableDef)) builder.SchemaDef {
	def := chatDef()
	def.Tables = slices.Clone(def.Tables)
	for i := range def.Tables {
		if def.Tables[i].Name == name {
			fn(&def.Tables[i])
			return def
		}
	}
	td := builder.TableDef{Name: name}
	fn(&td)
	def.Tables = append(def.Tables, td)
	return def
}

// TestChatCorrect: the correct declaration passes the catalog, ownership
// and write properties on every engine, huddles left out included.
func TestChatCorrect(t *testing.T) {
	expectGreen(t, func(dsn string) Target { return chatTarget(dsn, chatDef()) }, 9, 10, 27, 52, 58)
}

// TestChatMistakes: the probe's mistakes, each of which passed Open and
// every property while leaking, fail the property that owns the class, or
// Open itself.
func TestChatMistakes(t *testing.T) {
	fk := func(col, ref string) builder.ForeignKey {
		return builder.ForeignKey{Columns: []string{col}, RefTable: ref}
	}
	cases := []struct {
		name string
		def  builder.SchemaDef
		id   int
		want string
	}{
		// Every realm read every realm's huddles: their tenants come from
		// the recipients the realms' subscriptions point at.
		{"huddles_global", chatEdit("huddles", func(td *builder.TableDef) {
			*td = builder.TableDef{Name: "huddles", Columns: []string{"id", "huddle_hash", "recipient_id"}, PrimaryKey: []string{"id"},
				Global: true, GlobalReason: "a huddle is a hash of user ids", ForeignKeys: []builder.ForeignKey{fk("recipient_id", "recipients")}}
		}), 58, "huddles (declared global"},
		// Realm 3, home of the bot, read realm 1's message 7: the message's
		// own realm_id says realm 1. Open now refuses it (id 0): realm_id
		// holds the realm's keys and is named like the level.
		{"messages_parent_sender", chatEdit("messages", func(td *builder.TableDef) {
			td.Levels, td.Parent = nil, "sender_id"
		}), 0, "messages.realm_id references realms.id, which holds the keys of level realm"},
		// A realm wrote attachments claiming another realm: realm_id is
		// named like the level column and nothing checks it.
		{"attachments_realm_undeclared", chatEdit("attachments", func(td *builder.TableDef) {
			td.Levels, td.Parent = nil, "owner_id"
		}), 9, "realm_id is named like a column of level realm"},
		// A realm subscribed its user to another realm's huddle: the key is
		// Unchecked and the run does not acknowledge it.
		{"subscription_recipient_unchecked", chatEdit("subscriptions", func(td *builder.TableDef) {
			td.ForeignKeys = []builder.ForeignKey{fk("user_id", "users"), {Columns: []string{"recipient_id"}, RefTable: "recipients", Unchecked: "recipients are shared"}}
		}), 9, `Target.Unchecked["subscriptions.recipient_id"]`},
	}
	forEachDSN(t, func(t *testing.T, dsn string) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				out, err := runSome(t, chatTarget(dsn, c.def), c.id)
				if c.id == 0 {
					if !errors.Is(err, guardedsql.ErrLevelColumn) || !strings.Contains(err.Error(), c.want) {
						t.Fatalf("Open: %v; want ErrLevelColumn containing %q", err, c.want)
					}
					return
				}
				if err != nil {
					t.Fatalf("setup (the mistake must open): %v", err)
				}
				o := out[c.id]
				if all := strings.Join(o.msgs, "\n"); !o.failed || !strings.Contains(all, c.want) {
					t.Fatalf("P%d: failed=%v skip=%q, messages %q; want a failure containing %q", c.id, o.failed, o.skip, o.msgs, c.want)
				}
				t.Logf("P%d: %s", c.id, o.msgs[0])
			})
		}
	})
}
