package hr

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/tenantmcp/tenantmcp/internal/devserver"
)

// Demo data, in the rows of the sample schema. Generate builds it
// deterministically, so tests compute what every caller may see in Go,
// independently of the guard.
type (
	RegionRow struct {
		RegionID   int64
		RegionName string
	}
	CountryRow struct {
		CountryID, CountryName string
		RegionID               int64
	}
	JobRow struct {
		JobID, JobTitle      string
		MinSalary, MaxSalary int64
	}
	CompanyRow  struct{ CompanyID, CompanyName string }
	LocationRow struct {
		LocationID                                                int64
		StreetAddress, PostalCode, City, StateProvince, CountryID string
	}
	DepartmentRow struct {
		DepartmentID   int64
		CompanyID      string
		DepartmentName string
		ManagerID      int64 // 0: none
		LocationID     int64
	}
	EmployeeRow struct {
		EmployeeID                            int64
		CompanyID, FirstName, LastName, Email string
		PhoneNumber, HireDate, JobID          string // HireDate: YYYY-MM-DD
		Salary                                float64
		CommissionPct                         float64 // 0: none (NULL)
		ManagerID, DepartmentID               int64   // 0: none (NULL)
	}
	JobHistoryRow struct {
		EmployeeID         int64
		StartDate, EndDate string // YYYY-MM-DD
		JobID              string
		DepartmentID       int64
	}
)

// Data is a whole demo data set.
type Data struct {
	Regions     []RegionRow
	Countries   []CountryRow
	Jobs        []JobRow
	Companies   []CompanyRow
	Locations   []LocationRow
	Departments []DepartmentRow
	Employees   []EmployeeRow
	JobHistory  []JobHistoryRow
}

// The sample's reference data (a subset of its countries and jobs).
var (
	Regions   = []RegionRow{{1, "Europe"}, {2, "Americas"}, {3, "Asia"}, {4, "Middle East and Africa"}}
	Countries = []CountryRow{{"CA", "Canada", 2}, {"DE", "Germany", 1}, {"UK", "United Kingdom", 1}, {"US", "United States of America", 2}}
	Jobs      = []JobRow{
		{"AD_PRES", "President", 20080, 40000}, {"AD_VP", "Administration Vice President", 15000, 30000},
		{"FI_MGR", "Finance Manager", 8200, 16000}, {"FI_ACCOUNT", "Accountant", 4200, 9000},
		{"AC_MGR", "Accounting Manager", 8200, 16000}, {"AC_ACCOUNT", "Public Accountant", 4200, 9000},
		{"SA_MAN", "Sales Manager", 10000, 20080}, {"SA_REP", "Sales Representative", 6000, 12008},
		{"ST_MAN", "Stock Manager", 5500, 8500}, {"ST_CLERK", "Stock Clerk", 2008, 5000},
		{"IT_PROG", "Programmer", 4000, 10000},
	}
)

var companyNames = []struct{ id, name string }{
	{"acme", "Acme Corporation"}, {"globex", "Globex Corporation"}, {"initech", "Initech"},
	{"umbrella", "Umbrella Corporation"}, {"hooli", "Hooli"}, {"stark", "Stark Industries"},
}

// The sites every company has. Each company gets its own location rows,
// with its own street numbers, except that the first two companies share
// one sales office (one row referenced by both), and one location is
// referenced by no department at all.
var sites = []struct{ street, postal, city, state, country string }{
	{"Charade Rd", "98199", "Seattle", "Washington", "US"},
	{"Interiors Blvd", "99236", "South San Francisco", "California", "US"},
	{"Schwanthalerstr.", "80925", "Munich", "Bavaria", "DE"},
}

// SharedSite is the sales office the first two companies share.
var SharedSite = LocationRow{StreetAddress: "Magdalen Centre, The Oxford Science Park", PostalCode: "OX9 9ZB", City: "Oxford", StateProvince: "Oxford", CountryID: "UK"}

// UnusedSite is a location no department references.
var UnusedSite = LocationRow{StreetAddress: "147 Spadina Ave", PostalCode: "M5V 2L7", City: "Toronto", StateProvince: "Ontario", CountryID: "CA"}

// The departments of every company: name, site (index into sites, or -1
// for the sales office) and the template index of its manager.
var deptTemplate = []struct {
	name    string
	site    int
	manager int
}{
	{"Executive", 0, 0}, {"IT", 0, 3}, {"Finance", 0, 6}, {"Shipping", 1, 8}, {"Sales", -1, 10},
}

// The employees of every company, after the sample's: department (index
// into deptTemplate, -1 for none: the sample's Kimberely Grant) and manager
// (template index, -1 for none). Managers come before their reports.
var empTemplate = []struct {
	first, last, email, phone, hired, job string
	salary, comm                          float64
	dept, manager                         int
}{
	{"Steven", "King", "SKING", "515.123.4567", "2003-06-17", "AD_PRES", 24000, 0, 0, -1},
	{"Neena", "Kochhar", "NKOCHHAR", "515.123.4568", "2005-09-21", "AD_VP", 17000, 0, 0, 0},
	{"Lex", "De Haan", "LDEHAAN", "515.123.4569", "2001-01-13", "AD_VP", 17000, 0, 0, 0},
	{"Alexander", "Hunold", "AHUNOLD", "590.423.4567", "2006-01-03", "IT_PROG", 9000, 0, 1, 2},
	{"Bruce", "Ernst", "BERNST", "590.423.4568", "2007-05-21", "IT_PROG", 6000, 0, 1, 3},
	{"Valli", "Pataballa", "VPATABAL", "590.423.4560", "2006-02-05", "IT_PROG", 4800, 0, 1, 3},
	{"Nancy", "Greenberg", "NGREENBE", "515.124.4569", "2002-08-17", "FI_MGR", 12008, 0, 2, 1},
	{"Daniel", "Faviet", "DFAVIET", "515.124.4169", "2002-08-16", "FI_ACCOUNT", 9000, 0, 2, 6},
	{"Adam", "Fripp", "AFRIPP", "650.123.2234", "2005-04-10", "ST_MAN", 8200, 0, 3, 0},
	{"Renske", "Ladwig", "RLADWIG", "650.121.1234", "2003-07-14", "ST_CLERK", 3600, 0, 3, 8},
	{"John", "Russell", "JRUSSEL", "011.44.1344.429268", "2004-10-01", "SA_MAN", 14000, 0.4, 4, 0},
	{"Peter", "Tucker", "PTUCKER", "011.44.1344.129268", "2005-01-30", "SA_REP", 10000, 0.3, 4, 10},
	{"Kimberely", "Grant", "KGRANT", "011.44.1644.429263", "2007-05-24", "SA_REP", 7000, 0.15, -1, 10},
}

// The job history of every company, after the sample's: employee
// (template index), dates, job, department (deptTemplate index).
var historyTemplate = []struct {
	emp        int
	start, end string
	job        string
	dept       int
}{
	{1, "1997-09-21", "2001-10-27", "AC_ACCOUNT", 2},
	{1, "2001-10-28", "2005-03-15", "AC_MGR", 2},
	{2, "1995-01-13", "2001-01-12", "IT_PROG", 1},
	{9, "2002-03-24", "2003-07-13", "ST_CLERK", 3},
	{12, "2006-01-01", "2007-05-23", "SA_REP", 4},
}

// MaxCompanies is the largest number of companies Generate makes.
var MaxCompanies = len(companyNames)

// Generate builds the demo data of n companies (at least 2, at most
// MaxCompanies). Every company has the same departments, employees,
// e-mail ids and phone numbers (the per-company unique key allows it), so
// a leak cannot hide behind distinct-looking data; salaries differ by
// company, so do reports. Every id is interleaved across companies:
// consecutive departments, employees and locations belong to different
// companies.
func Generate(n int) *Data {
	n = max(2, min(n, MaxCompanies))
	d := &Data{Regions: Regions, Countries: Countries, Jobs: Jobs}
	for c := range n {
		d.Companies = append(d.Companies, CompanyRow{companyNames[c].id, companyNames[c].name})
	}
	// Locations: site by site, company by company; then the shared sales
	// office and the unreferenced one.
	siteOf := map[[2]int]int64{} // (company, site) → location_id
	next := int64(1000)
	for s, site := range sites {
		for c := range n {
			next += 100
			siteOf[[2]int{c, s}] = next
			d.Locations = append(d.Locations, LocationRow{LocationID: next,
				StreetAddress: fmt.Sprintf("%d %s", 2004+10*c+s, site.street), PostalCode: site.postal,
				City: site.city, StateProvince: site.state, CountryID: site.country})
		}
	}
	next += 100
	shared := SharedSite
	shared.LocationID = next
	d.Locations = append(d.Locations, shared)
	for c := 2; c < n; c++ { // companies beyond the first two have their own sales office
		next += 100
		own := SharedSite
		own.LocationID, own.StreetAddress = next, fmt.Sprintf("%d Arthur St", 8204+c)
		own.City, own.StateProvince, own.PostalCode = "London", "", "SW1A 1AA"
		siteOf[[2]int{c, -1}] = next
		d.Locations = append(d.Locations, own)
	}
	siteOf[[2]int{0, -1}], siteOf[[2]int{1, -1}] = shared.LocationID, shared.LocationID
	next += 100
	unused := UnusedSite
	unused.LocationID = next
	d.Locations = append(d.Locations, unused)

	deptID := map[[2]int]int64{}
	for i, dt := range deptTemplate {
		for c := range n {
			id := int64(10 * (1 + i*n + c))
			deptID[[2]int{c, i}] = id
			d.Departments = append(d.Departments, DepartmentRow{DepartmentID: id, CompanyID: d.Companies[c].CompanyID,
				DepartmentName: dt.name, LocationID: siteOf[[2]int{c, dt.site}]})
		}
	}
	empID := map[[2]int]int64{}
	for i, et := range empTemplate {
		for c := range n {
			id := int64(100 + i*n + c)
			empID[[2]int{c, i}] = id
			e := EmployeeRow{EmployeeID: id, CompanyID: d.Companies[c].CompanyID, FirstName: et.first, LastName: et.last,
				Email: et.email, PhoneNumber: et.phone, HireDate: et.hired, JobID: et.job,
				Salary: et.salary + float64(250*c), CommissionPct: et.comm}
			if et.manager >= 0 {
				e.ManagerID = empID[[2]int{c, et.manager}]
			}
			if et.dept >= 0 {
				e.DepartmentID = deptID[[2]int{c, et.dept}]
			}
			d.Employees = append(d.Employees, e)
		}
	}
	for i := range d.Departments {
		dp := &d.Departments[i]
		c := d.companyIndex(dp.CompanyID)
		for t, dt := range deptTemplate {
			if deptID[[2]int{c, t}] == dp.DepartmentID {
				dp.ManagerID = empID[[2]int{c, dt.manager}]
			}
		}
	}
	for _, ht := range historyTemplate {
		for c := range n {
			d.JobHistory = append(d.JobHistory, JobHistoryRow{EmployeeID: empID[[2]int{c, ht.emp}], StartDate: ht.start, EndDate: ht.end,
				JobID: ht.job, DepartmentID: deptID[[2]int{c, ht.dept}]})
		}
	}
	return d
}

func (d *Data) companyIndex(id string) int {
	for i, c := range d.Companies {
		if c.CompanyID == id {
			return i
		}
	}
	return -1
}

// Employee returns the employee with id, and whether there is one.
func (d *Data) Employee(id int64) (EmployeeRow, bool) {
	for _, e := range d.Employees {
		if e.EmployeeID == id {
			return e, true
		}
	}
	return EmployeeRow{}, false
}

// Department returns the department with id, and whether there is one.
func (d *Data) Department(id int64) (DepartmentRow, bool) {
	for _, x := range d.Departments {
		if x.DepartmentID == id {
			return x, true
		}
	}
	return DepartmentRow{}, false
}

// DepartmentsOf returns the departments of company, in id order.
func (d *Data) DepartmentsOf(company string) []DepartmentRow {
	var out []DepartmentRow
	for _, x := range d.Departments {
		if x.CompanyID == company {
			out = append(out, x)
		}
	}
	return out
}

// LocationCompanies returns the companies whose departments reference
// location id (none for an unreferenced location), in company order.
func (d *Data) LocationCompanies(id int64) []string {
	var out []string
	for _, c := range d.Companies {
		for _, x := range d.Departments {
			if x.CompanyID == c.CompanyID && x.LocationID == id {
				out = append(out, c.CompanyID)
				break
			}
		}
	}
	return out
}

// Create runs DDL(engine) and inserts d, as the schema owner: a
// migration, the one place the example writes SQL text by hand; tools
// never do. departments.manager_id is set once the employees exist, as the
// sample's script does.
func Create(ctx context.Context, db *sql.DB, engine Engine, d *Data) error {
	ddl, err := DDL(engine)
	if err != nil {
		return err
	}
	ins, err := devserver.BeginSeed(ctx, db, engine == Postgres, ddl)
	if err != nil {
		return fmt.Errorf("hr: %w", err)
	}
	nullInt := func(v int64) any {
		if v == 0 {
			return nil
		}
		return v
	}
	// Dates are stored as tools bind them (DateValue), so that a key
	// holding a date compares equal whoever wrote it.
	day := func(s string) any {
		t, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return s // refused by the engine's date type, or stored as given
		}
		return DateValue(engine, t)
	}
	nullFloat := func(v float64) any {
		if v == 0 {
			return nil
		}
		return v
	}
	for _, r := range d.Regions {
		ins.Row("regions", []string{"region_id", "region_name"}, r.RegionID, r.RegionName)
	}
	for _, c := range d.Countries {
		ins.Row("countries", []string{"country_id", "country_name", "region_id"}, c.CountryID, c.CountryName, c.RegionID)
	}
	for _, j := range d.Jobs {
		ins.Row("jobs", []string{"job_id", "job_title", "min_salary", "max_salary"}, j.JobID, j.JobTitle, j.MinSalary, j.MaxSalary)
	}
	for _, c := range d.Companies {
		ins.Row("companies", []string{"company_id", "company_name"}, c.CompanyID, c.CompanyName)
	}
	for _, l := range d.Locations {
		ins.Row("locations", []string{"location_id", "street_address", "postal_code", "city", "state_province", "country_id"},
			l.LocationID, l.StreetAddress, l.PostalCode, l.City, l.StateProvince, l.CountryID)
	}
	for _, x := range d.Departments {
		ins.Row("departments", []string{"department_id", "company_id", "department_name", "location_id"},
			x.DepartmentID, x.CompanyID, x.DepartmentName, nullInt(x.LocationID))
	}
	for _, e := range d.Employees {
		ins.Row("employees", []string{"employee_id", "company_id", "first_name", "last_name", "email", "phone_number",
			"hire_date", "job_id", "salary", "commission_pct", "manager_id", "department_id"},
			e.EmployeeID, e.CompanyID, e.FirstName, e.LastName, e.Email, e.PhoneNumber, day(e.HireDate), e.JobID, e.Salary,
			nullFloat(e.CommissionPct), nullInt(e.ManagerID), nullInt(e.DepartmentID))
	}
	for _, x := range d.Departments {
		if x.ManagerID != 0 {
			ins.Exec("UPDATE departments SET manager_id = ? WHERE department_id = ?", x.ManagerID, x.DepartmentID)
		}
	}
	for _, h := range d.JobHistory {
		ins.Row("job_history", []string{"employee_id", "start_date", "end_date", "job_id", "department_id"},
			h.EmployeeID, day(h.StartDate), day(h.EndDate), h.JobID, nullInt(h.DepartmentID))
	}
	// The seed supplied ids: move the identity sequences past them.
	if err := ins.Commit(map[string]string{"locations": "location_id", "departments": "department_id", "employees": "employee_id"}); err != nil {
		return fmt.Errorf("hr: %w", err)
	}
	return nil
}

// DateValue is t as the schema owner binds it to a DATE column of engine,
// in the form guardedsql binds a time.Time on that engine: on SQLite,
// where a DATE is text, the UTC text "YYYY-MM-DD HH:MM:SS" (guardedsql
// sends a time.Time so, not in the driver's own form, whose "+00:00"
// suffix would make the same day compare unequal); on the other engines
// t itself. A date written by the owner then matches a key read back as a
// time.Time and bound by a tool, or by the conformance suite.
func DateValue(engine Engine, t time.Time) any {
	if engine == SQLite {
		return t.UTC().Format(time.DateTime)
	}
	return t
}
