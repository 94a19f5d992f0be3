package hr_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/conformance"
	"github.com/tenantmcp/tenantmcp/examples/hr/hr"
	"github.com/tenantmcp/tenantmcp/redact"
	"github.com/tenantmcp/tenantmcp/scope"
)

// liveDSNs are the engines the example's tests run on: embedded SQLite
// always, PostgreSQL and MariaDB/MySQL when their test DSNs are set (as in
// CI), each as a conformance target DSN ("" is the embedded SQLite).
func liveDSNs(t testing.TB) map[string]string {
	out := map[string]string{"sqlite": ""}
	for engine, env := range map[string]string{"postgres": "TENANTMCP_TEST_POSTGRES_DSN", "mysql": "TENANTMCP_TEST_MYSQL_DSN"} {
		if dsn := os.Getenv(env); dsn != "" {
			out[engine] = dsn
		} else {
			t.Logf("%s unset: %s not run", env, engine)
		}
	}
	return out
}

// TestConformance runs the conformance suite on the HR schema, its seed
// (three companies, interleaved ids, the same names, e-mail ids and phone
// numbers in every company, canaries planted per company) and its tools,
// on every engine of liveDSNs.
func TestConformance(t *testing.T) {
	if err := suiteReadsGraph(t); err != nil {
		t.Skipf("the conformance suite of this checkout cannot read the HR graph yet (%v); TestToolLeaks covers locations meanwhile", err)
	}
	onEachEngine(t, func(t *testing.T, dsn string) {
		seed := uint64(time.Now().UnixNano())
		rep := conformance.Run(t, hrTarget(dsn, seed))
		var b strings.Builder
		if err := conformance.WriteTable(&b, rep); err != nil {
			t.Error(err)
		}
		t.Logf("summary:\n%s", b.String())
	})
}

// onEachEngine runs fn as a subtest per engine of liveDSNs, in a fixed
// order.
func onEachEngine(t *testing.T, fn func(t *testing.T, dsn string)) {
	dsns := liveDSNs(t)
	for _, engine := range []string{"sqlite", "postgres", "mysql"} {
		if dsn, ok := dsns[engine]; ok {
			t.Run(engine, func(t *testing.T) { fn(t, dsn) })
		}
	}
}

// suiteReadsGraph reports the suite's refusal of the HR graph's table
// owned by reference (locations), nil when it reads the graph: the suite's
// own synthetic seed builds its reading of the graph first, here into a
// scratch SQLite file (its data is not used: TestConformance runs on its
// own seed).
func suiteReadsGraph(t *testing.T) error {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "probe.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = conformance.SyntheticSeed(hr.SchemaDef(), 1)(context.Background(), db, conformance.SQLite)
	if err != nil && strings.Contains(err.Error(), "locations") && strings.Contains(err.Error(), "scope parent") {
		return err
	}
	if err != nil {
		// Past the graph: the synthetic data is not what this test runs on.
		t.Logf("the suite's synthetic seed of the HR graph: %v", err)
	}
	return nil
}

// companies are the tenants of the conformance run.
var companies = []string{"acme", "globex", "initech"}

func hrTarget(dsn string, seed uint64) conformance.Target {
	grant := func(ids ...string) []scope.Grant {
		var g []scope.Grant
		for _, id := range ids {
			g = append(g, scope.Grant{Level: hr.LevelCompany, ID: id})
		}
		return g
	}
	return conformance.Target{
		Name:   "hr",
		DSN:    dsn,
		Graph:  hr.SchemaDef(),
		Schema: hr.Schema,
		Seed: func(ctx context.Context, db *sql.DB, engine conformance.Engine) (*conformance.Dataset, error) {
			d := hr.Generate(len(companies))
			plantCanaries(d, seed)
			if err := hr.Create(ctx, db, hr.Engine(engine), d); err != nil {
				return nil, err
			}
			return dataset(d), nil
		},
		Tenants: []conformance.Tenant{
			{Name: "company acme", Grants: grant("acme")},
			{Name: "company globex", Grants: grant("globex")},
			{Name: "company initech", Grants: grant("initech")},
			{Name: "acme and globex", Grants: grant("acme", "globex")},
		},
		// job_history's only plain column, end_date, is bound to start_date
		// by the sample's rule; its job_id (any job is valid) is what the
		// write properties may assign instead.
		Mutable: map[string]string{"companies": "company_name", "departments": "department_name", "employees": "phone_number", "job_history": "job_id"},
		Tools: &conformance.Tools{
			Register:  hr.Register,
			Levels:    []string{hr.LevelCompany},
			Redaction: hr.Redaction,
			Callers:   [][]string{{hr.RoleHR}, {hr.RoleStaff}},
			Calls:     hrCalls,
			Canaries:  hrCanaries,
		},
	}
}

// plantCanaries gives the first employee of every company (its president)
// a name, e-mail id and phone number found nowhere else, random per run.
func plantCanaries(d *hr.Data, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xca7a))
	seen := map[string]bool{}
	for i := range d.Employees {
		e := &d.Employees[i]
		if seen[e.CompanyID] {
			continue
		}
		seen[e.CompanyID] = true
		tag := strconv.FormatUint(100_000_000+rng.Uint64()%1_000_000_000, 36)
		e.FirstName = "Cn" + tag
		e.LastName = "Canary" + tag + e.CompanyID[:3]
		e.Email = "CN" + strings.ToUpper(tag+e.CompanyID[:3])
		e.PhoneNumber = fmt.Sprintf("650.%03d.%04d", 100+rng.IntN(900), rng.IntN(10_000))
	}
	// And each company's first office of its own (owned by reference) a
	// street address found nowhere else.
	seen = map[string]bool{}
	for i := range d.Locations {
		l := &d.Locations[i]
		if cs := d.LocationCompanies(l.LocationID); len(cs) == 1 && !seen[cs[0]] {
			seen[cs[0]] = true
			l.StreetAddress = fmt.Sprintf("%d Canary%s Rd", 100+rng.IntN(900), strconv.FormatUint(100_000_000+rng.Uint64()%1_000_000_000, 36))
		}
	}
}

func isCanary(r conformance.Row) bool {
	name, _ := r["last_name"].(string)
	return strings.HasPrefix(name, "Canary")
}

func hrCanaries(ds *conformance.Dataset) []conformance.Canary {
	var out []conformance.Canary
	for _, r := range ds.Tables["employees"] {
		if !isCanary(r) {
			continue
		}
		k := conformance.Key(r, []string{"employee_id"})
		out = append(out,
			conformance.Canary{Value: r["last_name"].(string), Category: redact.Name, Table: "employees", Key: k},
			conformance.Canary{Value: r["email"].(string), Category: redact.Email, Table: "employees", Key: k},
			conformance.Canary{Value: r["phone_number"].(string), Category: redact.Phone, Table: "employees", Key: k})
	}
	for _, r := range ds.Tables["locations"] {
		if street, _ := r["street_address"].(string); strings.Contains(street, " Canary") {
			out = append(out, conformance.Canary{Value: street, Category: redact.Address, Table: "locations", Key: conformance.Key(r, []string{"location_id"})})
		}
	}
	return out
}

// hrCalls reads what the tools show: departments, offices, every own
// department's employees, one department of each other company (a foreign
// id on purpose), every canary employee's job history (own and foreign),
// and, last because staff may not call it, the headcount report.
func hrCalls(ds *conformance.Dataset, tn conformance.Tenant) []conformance.ToolCall {
	own := map[string]bool{}
	for _, g := range tn.Grants {
		own[g.ID] = true
	}
	calls := []conformance.ToolCall{{Tool: "list_departments"}, {Tool: "list_locations"}}
	probed := map[string]bool{}
	for _, r := range ds.Tables["departments"] {
		c := r["company_id"].(string)
		if own[c] || !probed[c] {
			probed[c] = true
			calls = append(calls, conformance.ToolCall{Tool: "list_department_employees", Args: map[string]any{"department_id": r["department_id"]}})
		}
	}
	for _, r := range ds.Tables["employees"] {
		if isCanary(r) {
			calls = append(calls, conformance.ToolCall{Tool: "employee_job_history", Args: map[string]any{"employee_id": r["employee_id"]}})
		}
	}
	return append(calls, conformance.ToolCall{Tool: "headcount_report"})
}

// seedDate is a seed date as the suite's own connection reads a DATE
// back on every engine: a time.Time at midnight UTC.
func seedDate(s string) any {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return t
}

func nullInt(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

func nullFloat(v float64) any {
	if v == 0 {
		return nil
	}
	return v
}

// dataset turns the example's data into the suite's Dataset.
func dataset(d *hr.Data) *conformance.Dataset {
	ds := &conformance.Dataset{}
	date := seedDate
	for _, r := range d.Regions {
		ds.Add("regions", conformance.Row{"region_id": r.RegionID, "region_name": r.RegionName})
	}
	for _, c := range d.Countries {
		ds.Add("countries", conformance.Row{"country_id": c.CountryID, "country_name": c.CountryName, "region_id": c.RegionID})
	}
	for _, j := range d.Jobs {
		ds.Add("jobs", conformance.Row{"job_id": j.JobID, "job_title": j.JobTitle, "min_salary": j.MinSalary, "max_salary": j.MaxSalary})
	}
	for _, c := range d.Companies {
		ds.Add("companies", conformance.Row{"company_id": c.CompanyID, "company_name": c.CompanyName})
	}
	for _, l := range d.Locations {
		ds.Add("locations", conformance.Row{"location_id": l.LocationID, "street_address": l.StreetAddress, "postal_code": l.PostalCode,
			"city": l.City, "state_province": l.StateProvince, "country_id": l.CountryID})
	}
	for _, x := range d.Departments {
		ds.Add("departments", conformance.Row{"department_id": x.DepartmentID, "company_id": x.CompanyID, "department_name": x.DepartmentName,
			"manager_id": nullInt(x.ManagerID), "location_id": nullInt(x.LocationID)})
	}
	for _, e := range d.Employees {
		ds.Add("employees", conformance.Row{"employee_id": e.EmployeeID, "company_id": e.CompanyID, "first_name": e.FirstName,
			"last_name": e.LastName, "email": e.Email, "phone_number": e.PhoneNumber, "hire_date": date(e.HireDate), "job_id": e.JobID,
			"salary": e.Salary, "commission_pct": nullFloat(e.CommissionPct), "manager_id": nullInt(e.ManagerID), "department_id": nullInt(e.DepartmentID)})
	}
	for _, h := range d.JobHistory {
		ds.Add("job_history", conformance.Row{"employee_id": h.EmployeeID, "start_date": date(h.StartDate), "end_date": date(h.EndDate),
			"job_id": h.JobID, "department_id": nullInt(h.DepartmentID)})
	}
	return ds
}

// TestLocationsMutationCaught: the mutation check breaks the table owned
// by reference too (its read and write guards dropped; on PostgreSQL its
// row-level security as well), and the suite notices (conformance.MustCatch)
// on every engine of liveDSNs. Mutate skips without -tags tenantmcp_faults.
func TestLocationsMutationCaught(t *testing.T) {
	onEachEngine(t, func(t *testing.T, dsn string) {
		ms := conformance.Mutate(t, hrTarget(dsn, 1), conformance.MutateOptions{Tables: []string{"locations"}})
		if len(ms) != 1 || len(ms[0].Caught) == 0 {
			t.Fatalf("mutations %+v: want locations broken and caught", ms)
		}
		t.Logf("locations %s fault caught by %v; %s", ms[0].Fault, ms[0].Caught, ms[0].Example)
	})
}
