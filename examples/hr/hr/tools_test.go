package hr_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/examples/hr/hr"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/scope"
	"github.com/tenantmcp/tenantmcp/scope/scopetest"
)

// TestToolLeaks runs the tools over MCP with real signed tokens, on every
// engine of liveDSNs, for companies whose department, employee and
// location ids are interleaved (consecutive ids belong to different
// companies) and whose names, e-mail ids and phone numbers repeat in every
// company: each company's HR reads exactly its own rows and values, and
// another company's department, employee or office is "not found" exactly
// like one that does not exist; no write reaches another company, through
// the tools or through any of job_history's two paths or the foreign keys
// between departments and employees.
func TestToolLeaks(t *testing.T) {
	for engine, dsn := range liveDSNs(t) {
		t.Run(engine, func(t *testing.T) {
			s := serve(t, engine, dsn)
			t.Run("reads", func(t *testing.T) {
				for _, c := range []string{"acme", "globex"} {
					checkReads(t, s, c)
				}
			})
			t.Run("redaction", func(t *testing.T) { checkRedaction(t, s) })
			t.Run("hire", func(t *testing.T) { checkHire(t, s) })
			t.Run("transfer", func(t *testing.T) { checkTransfer(t, s) })
			t.Run("locations", func(t *testing.T) { checkLocationWrites(t, s) })
			t.Run("guard paths", func(t *testing.T) { checkGuardPaths(t, s) })
			t.Run("legacy row across companies", func(t *testing.T) { checkLegacyRow(t, s) })
		})
	}
}

// visibleLocations are the locations company may see: those its
// departments reference (owned by reference), or all of them while
// locations are declared global.
func visibleLocations(d *hr.Data, company string) []int64 {
	var out []int64
	for _, l := range d.Locations {
		if !hr.Schema.IsOwnedByReference("locations") || slices.Contains(d.LocationCompanies(l.LocationID), company) {
			out = append(out, l.LocationID)
		}
	}
	return out
}

func checkReads(t testing.TB, s *served, company string) {
	d := s.data
	cl := s.as(t, company+"-hr", "/companies/"+company+"/hr")
	var missingText string
	{
		var x hr.DepartmentEmployeesOut
		failed, text := cl.call(t, "list_department_employees", map[string]any{"department_id": 999999}, &x)
		if !failed {
			t.Fatalf("department 999999 found")
		}
		missingText = text
	}

	// Departments, with their offices.
	var deps hr.DepartmentsOut
	cl.ok(t, "list_departments", nil, &deps)
	var gotIDs, wantIDs []int64
	for _, x := range deps.Departments {
		gotIDs = append(gotIDs, x.DepartmentID)
		want, ok := d.Department(x.DepartmentID)
		if !ok || want.CompanyID != company {
			t.Fatalf("%s: list_departments shows department %d of %q", company, x.DepartmentID, want.CompanyID)
		}
		if x.Location == nil || x.Location.LocationID != want.LocationID {
			t.Fatalf("%s: department %d: location %+v, want %d", company, x.DepartmentID, x.Location, want.LocationID)
		}
		for _, l := range d.Locations {
			if l.LocationID == want.LocationID && (l.StreetAddress != x.Location.StreetAddress || l.City != x.Location.City) {
				t.Fatalf("%s: department %d's office is %+v, want %+v", company, x.DepartmentID, x.Location, l)
			}
		}
	}
	for _, x := range d.DepartmentsOf(company) {
		wantIDs = append(wantIDs, x.DepartmentID)
	}
	if !slices.Equal(gotIDs, wantIDs) {
		t.Fatalf("%s: departments %v, want %v", company, gotIDs, wantIDs)
	}

	// Offices, read straight from locations.
	var locs hr.LocationsOut
	cl.ok(t, "list_locations", nil, &locs)
	var gotLocs []int64
	for _, l := range locs.Locations {
		gotLocs = append(gotLocs, l.LocationID)
	}
	if want := visibleLocations(d, company); !slices.Equal(gotLocs, want) {
		t.Fatalf("%s: list_locations %v, want %v (owned by reference: %v)", company, gotLocs, want, hr.Schema.IsOwnedByReference("locations"))
	}

	// Every department's employees: own ones exactly, foreign ones not found.
	for _, dep := range d.Departments {
		var out hr.DepartmentEmployeesOut
		failed, text := cl.call(t, "list_department_employees", map[string]any{"department_id": dep.DepartmentID}, &out)
		if dep.CompanyID != company {
			if !failed || text != missingText {
				t.Fatalf("%s: list_department_employees(%d of %s) = %v %q, want the error of a missing one %q", company, dep.DepartmentID, dep.CompanyID, failed, text, missingText)
			}
			continue
		}
		if failed {
			t.Fatalf("%s: list_department_employees(%d): %s", company, dep.DepartmentID, text)
		}
		var got, want []string
		for _, e := range out.Employees {
			got = append(got, fmt.Sprintf("%d %s %s %s %s %.2f", e.EmployeeID, e.LastName, e.Email, e.PhoneNumber, e.HireDate, e.Salary))
		}
		for _, e := range d.Employees {
			if e.DepartmentID == dep.DepartmentID {
				want = append(want, fmt.Sprintf("%d %s %s %s %s %.2f", e.EmployeeID, e.LastName, e.Email, e.PhoneNumber, e.HireDate, e.Salary))
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: department %d employees\n got %q\nwant %q", company, dep.DepartmentID, got, want)
		}
	}

	// Every employee's job history: own exactly (both of its paths lead to
	// the company), foreign not found.
	var missingEmp string
	{
		failed, text := cl.call(t, "employee_job_history", map[string]any{"employee_id": 999999}, nil)
		if !failed {
			t.Fatal("employee 999999 found")
		}
		missingEmp = text
	}
	for _, e := range d.Employees {
		var out hr.JobHistoryOut
		failed, text := cl.call(t, "employee_job_history", map[string]any{"employee_id": e.EmployeeID}, &out)
		if e.CompanyID != company {
			if !failed || text != missingEmp {
				t.Fatalf("%s: employee_job_history(%d of %s) = %v %q, want %q", company, e.EmployeeID, e.CompanyID, failed, text, missingEmp)
			}
			continue
		}
		if failed {
			t.Fatalf("%s: employee_job_history(%d): %s", company, e.EmployeeID, text)
		}
		var got, want []string
		for _, h := range out.History {
			got = append(got, fmt.Sprintf("%s %s %s %d %s", h.StartDate, h.EndDate, h.JobID, deref(h.DepartmentID), h.DepartmentName))
		}
		for _, h := range d.JobHistory {
			if h.EmployeeID == e.EmployeeID {
				dep, _ := d.Department(h.DepartmentID)
				want = append(want, fmt.Sprintf("%s %s %s %d %s", h.StartDate, h.EndDate, h.JobID, h.DepartmentID, dep.DepartmentName))
			}
		}
		if out.Employee.EmployeeID != e.EmployeeID || !slices.Equal(got, want) {
			t.Fatalf("%s: employee %d history\n got %q\nwant %q", company, e.EmployeeID, got, want)
		}
	}

	// The report equals sums over the company's own rows.
	var rep hr.HeadcountOut
	cl.ok(t, "headcount_report", nil, &rep)
	var lines []string
	for _, l := range rep.Departments {
		lines = append(lines, fmt.Sprintf("%d %d %.2f", l.DepartmentID, l.Headcount, l.TotalSalary))
	}
	var want []string
	var total float64
	var heads int64
	for _, dep := range d.DepartmentsOf(company) {
		var n int64
		var sum float64
		for _, e := range d.Employees {
			if e.DepartmentID == dep.DepartmentID {
				n++
				sum += e.Salary
			}
		}
		want = append(want, fmt.Sprintf("%d %d %.2f", dep.DepartmentID, n, sum))
		total, heads = total+sum, heads+n
	}
	for _, e := range d.Employees {
		if e.CompanyID == company && e.DepartmentID == 0 {
			total, heads = total+e.Salary, heads+1
		}
	}
	if !slices.Equal(lines, want) || rep.Headcount != heads || fmt.Sprintf("%.2f", rep.TotalSalary) != fmt.Sprintf("%.2f", total) {
		t.Fatalf("%s: headcount report %q, %d, %.2f; want %q, %d, %.2f", company, lines, rep.Headcount, rep.TotalSalary, want, heads, total)
	}

	// No value that only another company holds reached this caller: its
	// marker names and the street addresses of offices this company does
	// not use.
	shown := cl.transcript.String()
	for _, e := range d.Employees {
		if e.CompanyID != company && strings.HasPrefix(e.FirstName, "Mk") && strings.Contains(shown, e.FirstName) {
			t.Fatalf("%s was shown %q, a name of %s", company, e.FirstName, e.CompanyID)
		}
	}
	if hr.Schema.IsOwnedByReference("locations") {
		for _, l := range d.Locations {
			if !slices.Contains(d.LocationCompanies(l.LocationID), company) && strings.Contains(shown, l.StreetAddress) {
				t.Fatalf("%s was shown the address %q of an office it does not use", company, l.StreetAddress)
			}
		}
	}
	if !strings.Contains(shown, "Mk") {
		t.Fatalf("%s saw none of its own marker names: the reads showed nothing", company)
	}
}

// checkRedaction reads acme's IT department as HR and as staff: HR sees
// names, e-mail ids, phone numbers and salaries; staff sees the names and
// none of the rest.
func checkRedaction(t testing.TB, s *served) {
	d := s.data
	it := firstOf(t, d, "acme", "IT")
	var secrets, names []string
	for _, e := range d.Employees {
		if e.DepartmentID == it.DepartmentID {
			names = append(names, e.FirstName)
			secrets = append(secrets, e.Email, e.PhoneNumber, fmt.Sprintf(`"salary":%g`, e.Salary))
		}
	}
	hrUser, staff := s.as(t, "alice", "/companies/acme/hr"), s.as(t, "carol", "/companies/acme/staff")
	var out hr.DepartmentEmployeesOut
	hrUser.ok(t, "list_department_employees", map[string]any{"department_id": it.DepartmentID}, &out)
	if failed, text := staff.call(t, "list_department_employees", map[string]any{"department_id": it.DepartmentID}, nil); failed {
		t.Fatalf("staff: %s", text)
	}
	for _, v := range append(names, secrets...) {
		if !strings.Contains(hrUser.transcript.String(), v) {
			t.Fatalf("HR was not shown %q", v)
		}
	}
	for _, v := range names {
		if !strings.Contains(staff.transcript.String(), v) {
			t.Fatalf("staff was not shown the name %q", v)
		}
	}
	for _, v := range secrets {
		if strings.Contains(staff.transcript.String(), v) {
			t.Fatalf("staff was shown %q:\n%s", v, staff.transcript.String())
		}
	}
}

// firstOf returns the first department of company named name.
func firstOf(t testing.TB, d *hr.Data, company, name string) hr.DepartmentRow {
	for _, x := range d.DepartmentsOf(company) {
		if x.DepartmentName == name {
			return x
		}
	}
	t.Fatalf("no department %s of %s", name, company)
	return hr.DepartmentRow{}
}

func employeeOf(t testing.TB, d *hr.Data, company, last string) hr.EmployeeRow {
	for _, e := range d.Employees {
		if e.CompanyID == company && e.LastName == last {
			return e
		}
	}
	t.Fatalf("no employee %s of %s", last, company)
	return hr.EmployeeRow{}
}

func checkHire(t testing.TB, s *served) {
	d := s.data
	alice := s.as(t, "alice", "/companies/acme/hr")
	bob := s.as(t, "bob", "/companies/globex/hr")
	both := s.as(t, "dana", "/companies/acme/hr", "/companies/globex/hr")
	staff := s.as(t, "carol", "/companies/acme/staff")
	acmeIT, globexIT := firstOf(t, d, "acme", "IT"), firstOf(t, d, "globex", "IT")
	globexKing := employeeOf(t, d, "globex", "King")
	hire := func(email string, dept int64, manager *int64) map[string]any {
		a := map[string]any{"first_name": "Ada", "last_name": "Lovelace", "email": email, "phone_number": "515.555.0100",
			"hire_date": "2026-02-02", "job_id": "IT_PROG", "salary": 7000, "department_id": dept}
		if manager != nil {
			a["manager_id"] = *manager
		}
		return a
	}
	before := s.count(t, "SELECT COUNT(*) FROM employees")
	for _, c := range []struct {
		who  *client
		args map[string]any
		why  string
	}{
		{alice, hire("ALOVELACE", globexIT.DepartmentID, nil), "a department of globex"},
		{alice, hire("ALOVELACE", acmeIT.DepartmentID, &globexKing.EmployeeID), "a manager of globex"},
		{alice, hire("SKING", acmeIT.DepartmentID, nil), "an e-mail id acme already has"},
		{both, hire("ALOVELACE", acmeIT.DepartmentID, &globexKing.EmployeeID), "a manager of the caller's other company"},
		{staff, hire("ALOVELACE", acmeIT.DepartmentID, nil), "a caller without the hr role"},
	} {
		if failed, text := c.who.call(t, "hire_employee", c.args, nil); !failed {
			t.Fatalf("%s hired with %s: %s", c.who.name, c.why, text)
		}
	}
	if n := s.count(t, "SELECT COUNT(*) FROM employees"); n != before {
		t.Fatalf("refused hires left %d employees, want %d", n, before)
	}
	// An e-mail id only globex uses is free in acme: the per-company key
	// answers the same whether or not another company holds the value.
	var g, a hr.HiredOut
	bob.ok(t, "hire_employee", hire("GLXONLY", globexIT.DepartmentID, nil), &g)
	alice.ok(t, "hire_employee", hire("GLXONLY", acmeIT.DepartmentID, nil), &a)
	if g.EmployeeID == 0 || a.EmployeeID == 0 || g.EmployeeID == a.EmployeeID {
		t.Fatalf("hired ids %d and %d", g.EmployeeID, a.EmployeeID)
	}
	if n := s.count(t, "SELECT COUNT(*) FROM employees WHERE email = ? AND company_id = ? AND department_id = ? AND manager_id = ?",
		"GLXONLY", "acme", acmeIT.DepartmentID, acmeIT.ManagerID); n != 1 {
		t.Fatalf("acme's new employee: %d rows with its company, department and manager", n)
	}
	var h hr.JobHistoryOut
	alice.ok(t, "employee_job_history", map[string]any{"employee_id": a.EmployeeID}, &h)
	if h.Employee.Email != "GLXONLY" || h.Employee.HireDate != "2026-02-02" || len(h.History) != 0 {
		t.Fatalf("alice reads her hire as %+v", h)
	}
	if failed, _ := bob.call(t, "employee_job_history", map[string]any{"employee_id": a.EmployeeID}, nil); !failed {
		t.Fatalf("bob reads acme's new employee %d", a.EmployeeID)
	}
}

func checkTransfer(t testing.TB, s *served) {
	d := s.data
	alice := s.as(t, "alice", "/companies/acme/hr")
	both := s.as(t, "dana", "/companies/acme/hr", "/companies/globex/hr")
	ernst := employeeOf(t, d, "acme", "Ernst")
	acmeFinance, globexFinance := firstOf(t, d, "acme", "Finance"), firstOf(t, d, "globex", "Finance")
	globexErnst := employeeOf(t, d, "globex", "Ernst")
	state := func() string {
		var dept, mgr int64
		var job string
		q := "SELECT department_id, manager_id, job_id FROM employees WHERE employee_id = " + fmt.Sprint(ernst.EmployeeID)
		if err := s.owner.QueryRowContext(context.Background(), q).Scan(&dept, &mgr, &job); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d/%d/%s/%d", dept, mgr, job, s.count(t, "SELECT COUNT(*) FROM job_history"))
	}
	seeded := state()
	for _, c := range []struct {
		who  *client
		args map[string]any
		why  string
	}{
		{alice, map[string]any{"employee_id": ernst.EmployeeID, "department_id": globexFinance.DepartmentID, "effective_date": "2026-01-15"}, "into a department of globex"},
		{alice, map[string]any{"employee_id": globexErnst.EmployeeID, "department_id": acmeFinance.DepartmentID, "effective_date": "2026-01-15"}, "an employee of globex"},
		{both, map[string]any{"employee_id": ernst.EmployeeID, "department_id": globexFinance.DepartmentID, "effective_date": "2026-01-15"}, "into the caller's other company"},
		{alice, map[string]any{"employee_id": ernst.EmployeeID, "department_id": acmeFinance.DepartmentID, "effective_date": "2007-05-22"}, "before the current assignment could end"},
	} {
		if failed, text := c.who.call(t, "transfer_employee", c.args, nil); !failed {
			t.Fatalf("%s transferred %s: %s", c.who.name, c.why, text)
		}
		if got := state(); got != seeded {
			t.Fatalf("a refused transfer (%s) changed the database: %s, was %s", c.why, got, seeded)
		}
	}
	var out hr.TransferOut
	alice.ok(t, "transfer_employee", map[string]any{"employee_id": ernst.EmployeeID, "department_id": acmeFinance.DepartmentID,
		"effective_date": "2026-01-15", "job_id": "FI_ACCOUNT"}, &out)
	want := fmt.Sprintf("%d/%d/FI_ACCOUNT/%d", acmeFinance.DepartmentID, acmeFinance.ManagerID, len(d.JobHistory)+1)
	if got := state(); got != want {
		t.Fatalf("after the transfer: %s, want %s", got, want)
	}
	var h hr.JobHistoryOut
	alice.ok(t, "employee_job_history", map[string]any{"employee_id": ernst.EmployeeID}, &h)
	itName := firstOf(t, d, "acme", "IT").DepartmentName
	if len(h.History) != 1 || h.History[0].StartDate != ernst.HireDate || h.History[0].EndDate != "2026-01-14" ||
		h.History[0].JobID != "IT_PROG" || h.History[0].DepartmentName != itName || h.Employee.JobID != "FI_ACCOUNT" {
		t.Fatalf("history after the transfer: %+v", h)
	}
}

func checkLocationWrites(t testing.TB, s *served) {
	d := s.data
	alice := s.as(t, "alice", "/companies/acme/hr")
	bob := s.as(t, "bob", "/companies/globex/hr")
	acmeIT, acmeSales, globexIT := firstOf(t, d, "acme", "IT"), firstOf(t, d, "acme", "Sales"), firstOf(t, d, "globex", "IT")
	addr := func(dept int64, street string) map[string]any {
		return map[string]any{"department_id": dept, "street_address": street, "postal_code": "98199", "city": "Seattle", "state_province": "Washington"}
	}
	streetOf := func(loc int64) string {
		var v string
		q := "SELECT street_address FROM locations WHERE location_id = " + fmt.Sprint(loc)
		if err := s.owner.QueryRowContext(context.Background(), q).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if !hr.Schema.IsOwnedByReference("locations") {
		// Stop-gap: locations are global, which guarded code may not write.
		if failed, text := alice.call(t, "update_location_address", addr(acmeIT.DepartmentID, "1 Moved St"), nil); !failed {
			t.Fatalf("a global table was written: %s", text)
		}
		return
	}
	sharedBefore, globexBefore := streetOf(acmeSales.LocationID), streetOf(globexIT.LocationID)
	_, missing := alice.call(t, "update_location_address", addr(999999, "1 Moved St"), nil)
	for _, c := range []struct {
		args map[string]any
		why  string
		want string
	}{
		{addr(acmeSales.DepartmentID, "1 Moved St"), "an office globex's Sales shares",
			fmt.Sprintf("the office of department %d is shared with departments outside your companies; it cannot be changed here", acmeSales.DepartmentID)},
		{addr(globexIT.DepartmentID, "1 Moved St"), "globex's office", missing},
	} {
		if failed, text := alice.call(t, "update_location_address", c.args, nil); !failed || text != c.want {
			t.Fatalf("alice changing %s: %v %q, want the error %q", c.why, failed, text, c.want)
		}
	}
	if streetOf(acmeSales.LocationID) != sharedBefore || streetOf(globexIT.LocationID) != globexBefore {
		t.Fatal("a refused address change changed the database")
	}
	var loc hr.Location
	alice.ok(t, "update_location_address", addr(acmeIT.DepartmentID, "2004 Charade Rd, Floor 5"), &loc)
	if loc.LocationID != acmeIT.LocationID || streetOf(acmeIT.LocationID) != "2004 Charade Rd, Floor 5" {
		t.Fatalf("alice's change: %+v, stored %q", loc, streetOf(acmeIT.LocationID))
	}
	var locs hr.LocationsOut
	bob.ok(t, "list_locations", nil, &locs)
	for _, l := range locs.Locations {
		if l.LocationID == acmeIT.LocationID || strings.Contains(l.StreetAddress, "Floor 5") {
			t.Fatalf("bob sees acme's office %+v", l)
		}
	}
}

// checkGuardPaths writes through the guard directly, as acme, what no tool
// writes: rows whose other paths (job_history.department_id,
// employees.manager_id, employees.department_id, departments.manager_id)
// point into globex, and departments pointed at globex's own office (a
// location owned by reference: no company may claim another's). Each must be refused and change nothing; the same
// statement pointing at acme's own rows is accepted (in a transaction
// rolled back), so each refusal is the guard's, not a broken statement.
func checkGuardPaths(t testing.TB, s *served) {
	d := s.data
	ctx := scopetest.NewContext(context.Background(), scopetest.New("acme-writer", []scope.Grant{{Level: hr.LevelCompany, ID: "acme"}}))
	db := s.app.DB
	acmeKing, globexKing := employeeOf(t, d, "acme", "King"), employeeOf(t, d, "globex", "King")
	acmeIT, acmeFinance, globexIT := firstOf(t, d, "acme", "IT"), firstOf(t, d, "acme", "Finance"), firstOf(t, d, "globex", "IT")
	acmeShipping := firstOf(t, d, "acme", "Shipping")
	grant := employeeOf(t, d, "acme", "Grant")
	day := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	emp, dep, jh := hr.Schema.Table("employees"), hr.Schema.Table("departments"), hr.Schema.Table("job_history")
	// Each write takes the department, the manager and the office it
	// points at.
	writes := []struct {
		what string
		m    func(dept, mgr, loc int64) (builder.Mutation, error)
	}{
		{"job_history of an acme employee in the department", func(dept, _, _ int64) (builder.Mutation, error) {
			return builder.InsertInto(jh).Columns("employee_id", "start_date", "end_date", "job_id", "department_id").
				Values(grant.EmployeeID, day, day.AddDate(0, 1, 0), "SA_REP", dept).Build()
		}},
		{"an acme job_history row moved to the department", func(dept, _, _ int64) (builder.Mutation, error) {
			return builder.UpdateTable(jh).Set("department_id", dept).Where(jh.Col("employee_id").Eq(grant.EmployeeID)).Build()
		}},
		{"an acme employee managed by the manager", func(_, mgr, _ int64) (builder.Mutation, error) {
			return builder.UpdateTable(emp).Set("manager_id", mgr).Where(emp.Col("employee_id").Eq(grant.EmployeeID)).Build()
		}},
		{"an acme employee moved to the department", func(dept, _, _ int64) (builder.Mutation, error) {
			return builder.UpdateTable(emp).Set("department_id", dept).Where(emp.Col("employee_id").Eq(grant.EmployeeID)).Build()
		}},
		{"an acme department managed by the manager", func(_, mgr, _ int64) (builder.Mutation, error) {
			return builder.UpdateTable(dep).Set("manager_id", mgr).Where(dep.Col("department_id").Eq(acmeIT.DepartmentID)).Build()
		}},
		{"an acme department moved into the office", func(_, _, loc int64) (builder.Mutation, error) {
			return builder.UpdateTable(dep).Set("location_id", loc).Where(dep.Col("department_id").Eq(acmeIT.DepartmentID)).Build()
		}},
		{"a new acme department in the office", func(_, mgr, loc int64) (builder.Mutation, error) {
			return builder.InsertInto(dep).Columns("company_id", "department_name", "manager_id", "location_id").
				Values("acme", "Probe", mgr, loc).Build()
		}},
		{"a new acme employee managed by the manager", func(_, mgr, _ int64) (builder.Mutation, error) {
			return builder.InsertInto(emp).Columns("company_id", "last_name", "email", "hire_date", "job_id", "manager_id").
				Values("acme", "Probe", "PROBE", day, "IT_PROG", mgr).Build()
		}},
	}
	snapshot := func() string {
		return fmt.Sprint(s.count(t, "SELECT COUNT(*) FROM job_history"), s.count(t, "SELECT COUNT(*) FROM employees"),
			s.count(t, "SELECT COUNT(*) FROM job_history WHERE department_id = ?", globexIT.DepartmentID),
			s.count(t, "SELECT COUNT(*) FROM employees WHERE manager_id = ? OR department_id = ?", globexKing.EmployeeID, globexIT.DepartmentID),
			s.count(t, "SELECT COUNT(*) FROM departments WHERE manager_id = ? OR location_id = ?", globexKing.EmployeeID, globexIT.LocationID),
			s.count(t, "SELECT COUNT(*) FROM departments"))
	}
	before := snapshot()
	errDone := errors.New("rollback")
	for _, w := range writes {
		foreign, err := w.m(globexIT.DepartmentID, globexKing.EmployeeID, globexIT.LocationID)
		if err != nil {
			t.Fatalf("%s: %v", w.what, err)
		}
		res, err := db.Exec(ctx, foreign)
		switch {
		case err == nil && res.RowsAffected != 0:
			t.Errorf("%s of globex: %d rows written", w.what, res.RowsAffected)
		case err != nil && !errors.Is(err, guardedsql.ErrNotFound) && !errors.Is(err, guardedsql.ErrOutOfScope) && !errors.Is(err, guardedsql.ErrRefused):
			t.Errorf("%s of globex: %v, want the guard's refusal", w.what, err)
		}
		own, err := w.m(acmeFinance.DepartmentID, acmeKing.EmployeeID, acmeShipping.LocationID)
		if err != nil {
			t.Fatalf("%s: %v", w.what, err)
		}
		err = db.Tx(ctx, func(tx *guardedsql.Tx) error {
			res, err := tx.Exec(ctx, own)
			if err != nil {
				return err
			}
			if res.RowsAffected < 1 {
				return fmt.Errorf("%d rows affected", res.RowsAffected)
			}
			return errDone
		})
		if !errors.Is(err, errDone) {
			t.Errorf("control: %s of acme: %v", w.what, err)
		}
	}
	if after := snapshot(); after != before {
		t.Fatalf("writes along other paths into globex changed the database: %s, was %s", after, before)
	}
}

// checkLegacyRow plants, as the owner, what the guard never lets a tool
// write: a job_history row of an acme employee whose department is
// globex's (data from before the company split, say). The row is acme's,
// by its scope parent; acme reads it without globex's department (the
// LEFT JOIN finds no department acme may see), globex does not see it, and
// acme may not delete it: its other path leads outside acme
// (guardedsql.ErrSharedRow), so it stays.
func checkLegacyRow(t testing.TB, s *served) {
	d := s.data
	grant := employeeOf(t, d, "acme", "Grant")
	globexSales := firstOf(t, d, "globex", "Sales")
	ph := func(i int) string {
		if s.engine == "postgres" {
			return fmt.Sprintf("$%d", i)
		}
		return "?"
	}
	start := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.owner.ExecContext(context.Background(),
		fmt.Sprintf("INSERT INTO job_history (employee_id, start_date, end_date, job_id, department_id) VALUES (%s, %s, %s, %s, %s)", ph(1), ph(2), ph(3), ph(4), ph(5)),
		grant.EmployeeID, hr.DateValue(hr.Engine(s.engine), start), hr.DateValue(hr.Engine(s.engine), start.AddDate(0, 11, 30)), "SA_REP", globexSales.DepartmentID); err != nil {
		t.Fatal(err)
	}
	alice := s.as(t, "alice", "/companies/acme/hr")
	bob := s.as(t, "bob", "/companies/globex/hr")
	var h hr.JobHistoryOut
	alice.ok(t, "employee_job_history", map[string]any{"employee_id": grant.EmployeeID}, &h)
	if len(h.History) == 0 || h.History[0].StartDate != "1990-01-01" || h.History[0].DepartmentName != "" {
		t.Fatalf("alice reads the legacy row as %+v, want it first and without globex's department", h.History)
	}
	if failed, text := bob.call(t, "employee_job_history", map[string]any{"employee_id": grant.EmployeeID}, nil); !failed {
		t.Fatalf("bob reads acme's employee: %s", text)
	}
	ctx := scopetest.NewContext(context.Background(), scopetest.New("acme-writer", []scope.Grant{{Level: hr.LevelCompany, ID: "acme"}}))
	jh := hr.Schema.Table("job_history")
	del, err := builder.DeleteFrom(jh).Where(jh.Col("employee_id").Eq(grant.EmployeeID), jh.Col("start_date").Eq(start)).ExpectOne().Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.app.DB.Exec(ctx, del); !errors.Is(err, guardedsql.ErrSharedRow) {
		t.Fatalf("acme deleting its row that points at globex: %v, want ErrSharedRow", err)
	}
	if n := s.count(t, "SELECT COUNT(*) FROM job_history WHERE department_id = ?", globexSales.DepartmentID); n != 1+countHistory(d, globexSales.DepartmentID) {
		t.Fatalf("after the refused delete %d rows point at globex's Sales", n)
	}
}

func countHistory(d *hr.Data, dept int64) int {
	n := 0
	for _, h := range d.JobHistory {
		if h.DepartmentID == dept {
			n++
		}
	}
	return n
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
