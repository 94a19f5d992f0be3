package hr

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// Table references with typed columns (tables_gen.go, generated from the
// live schema by tenantmcp-gen): a misspelt column does not compile.
// Nothing here names a company: the guard adds it to every table of every
// statement.
var (
	departmentsT = NewDepartmentsTable(Schema, "")
	employeesT   = NewEmployeesTable(Schema, "")
	jobHistoryT  = NewJobHistoryTable(Schema, "")
	jobsT        = NewJobsTable(Schema, "")
	locationsT   = NewLocationsTable(Schema, "")
)

// RoleHR is the role of HR staff: they see contact details and pay, and
// only they may hire, transfer, move offices and run the headcount report.
// RoleStaff is every other employee using the tools: names and offices,
// no contact details, no pay.
const (
	RoleHR    = "hr"
	RoleStaff = "staff"
)

// HROnly is the requirement of the tools only HR may list and call.
var HROnly = server.Require{Roles: []string{RoleHR}}

// Employee is an employee as tools return it. The pii tags tell package
// redact what to hide from callers whose roles may not see it. Pay has no
// category of its own in package redact; it is tagged ssn, a category with
// no safe hint (masked as "[redacted:ssn]", never partly shown), which only
// the hr role reveals and nothing else in this schema uses.
type Employee struct {
	EmployeeID    int64    `json:"employee_id"`
	FirstName     string   `json:"first_name" pii:"name"`
	LastName      string   `json:"last_name" pii:"name"`
	Email         string   `json:"email" pii:"email"`
	PhoneNumber   string   `json:"phone_number" pii:"phone"`
	HireDate      string   `json:"hire_date"`
	JobID         string   `json:"job_id"`
	JobTitle      string   `json:"job_title"`
	Salary        float64  `json:"salary" pii:"ssn"`
	CommissionPct *float64 `json:"commission_pct,omitempty" pii:"ssn"`
	ManagerID     *int64   `json:"manager_id,omitempty"`
	DepartmentID  *int64   `json:"department_id,omitempty"`
}

// Location is an office. Street addresses are tagged: the guard confines
// locations to the companies whose departments sit there, and redaction
// applies to them as to any other table.
type Location struct {
	LocationID    int64  `json:"location_id"`
	StreetAddress string `json:"street_address" pii:"address"`
	PostalCode    string `json:"postal_code"`
	City          string `json:"city"`
	StateProvince string `json:"state_province,omitempty"`
	CountryID     string `json:"country_id"`
}

// Department is a department with its manager and office.
type Department struct {
	DepartmentID   int64     `json:"department_id"`
	DepartmentName string    `json:"department_name"`
	ManagerID      *int64    `json:"manager_id,omitempty"`
	Location       *Location `json:"location,omitempty"`
}

// Register adds the HR tools to s.
func Register(s *server.Server) error {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	return errors.Join(
		server.AddTool(s, server.Tool{Name: "list_departments", Description: "Your company's departments with their managers and offices.", Annotations: ro}, ListDepartments),
		server.AddTool(s, server.Tool{Name: "list_locations", Description: "The offices your company's departments sit in.", Annotations: ro}, ListLocations),
		server.AddTool(s, server.Tool{Name: "list_department_employees", Description: "The employees of one department, with their jobs.", Annotations: ro}, ListDepartmentEmployees),
		server.AddTool(s, server.Tool{Name: "employee_job_history", Description: "An employee's earlier jobs and departments, oldest first, and the current one.", Annotations: ro}, EmployeeJobHistory),
		server.AddTool(s, server.Tool{Name: "hire_employee", Description: "Hire an employee into a department (HR only).", Require: HROnly}, HireEmployee),
		server.AddTool(s, server.Tool{Name: "transfer_employee", Description: "Move an employee to another department from a date, recording the previous assignment in the job history (HR only).", Require: HROnly}, TransferEmployee),
		server.AddTool(s, server.Tool{Name: "update_location_address", Description: "Correct the address of a department's office (HR only).", Require: HROnly}, UpdateLocationAddress),
		server.AddTool(s, server.Tool{Name: "headcount_report", Description: "Headcount and salary totals per department (HR only).", Annotations: ro, Require: HROnly}, HeadcountReport),
	)
}

// DepartmentsOut lists departments.
type DepartmentsOut struct {
	Departments []Department `json:"departments"`
}

// ListDepartments lists the caller's departments, each with its office
// (LEFT JOIN locations: a department may have none).
func ListDepartments(ctx context.Context, db *guardedsql.DB, _ struct{}) (DepartmentsOut, error) {
	d, l := departmentsT.As("d"), locationsT.As("l")
	q, err := builder.Select(d.DepartmentID(), d.DepartmentName(), d.ManagerID(),
		l.LocationID(), l.StreetAddress(), l.PostalCode(), l.City(), l.StateProvince(), l.CountryID()).
		From(d.Ref()).LeftJoin(l.Ref(), l.LocationID().EqCol(d.LocationID())).
		OrderBy(d.DepartmentID().Asc()).Limit(500).Build()
	if err != nil {
		return DepartmentsOut{}, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return DepartmentsOut{}, err
	}
	out, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (Department, error) {
		var x Department
		var loc struct {
			id                               *int64
			street, postal, city, state, cty *string
		}
		err := rs.Scan(&x.DepartmentID, &x.DepartmentName, &x.ManagerID, &loc.id, &loc.street, &loc.postal, &loc.city, &loc.state, &loc.cty)
		if loc.id != nil {
			x.Location = &Location{LocationID: *loc.id, StreetAddress: deref(loc.street), PostalCode: deref(loc.postal),
				City: deref(loc.city), StateProvince: deref(loc.state), CountryID: deref(loc.cty)}
		}
		return x, err
	})
	return DepartmentsOut{Departments: nonNil(out)}, err
}

// LocationsOut lists offices.
type LocationsOut struct {
	Locations []Location `json:"locations"`
}

// ListLocations lists every location the caller can see, straight from
// the locations table: with locations owned by reference, the offices of
// the caller's departments and nothing else.
func ListLocations(ctx context.Context, db *guardedsql.DB, _ struct{}) (LocationsOut, error) {
	l := locationsT.As("l")
	q, err := builder.Select(l.LocationID(), l.StreetAddress(), l.PostalCode(), l.City(), l.StateProvince(), l.CountryID()).
		From(l.Ref()).OrderBy(l.LocationID().Asc()).Limit(500).Build()
	if err != nil {
		return LocationsOut{}, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return LocationsOut{}, err
	}
	out, err := guardedsql.CollectRows(rows, scanLocation)
	return LocationsOut{Locations: nonNil(out)}, err
}

func scanLocation(rs *guardedsql.Rows) (Location, error) {
	var x Location
	var street, postal, state, cty *string
	err := rs.Scan(&x.LocationID, &street, &postal, &x.City, &state, &cty)
	x.StreetAddress, x.PostalCode, x.StateProvince, x.CountryID = deref(street), deref(postal), deref(state), deref(cty)
	return x, err
}

// DepartmentIn names a department.
type DepartmentIn struct {
	DepartmentID int64 `json:"department_id"`
}

// DepartmentEmployeesOut is a department and its employees.
type DepartmentEmployeesOut struct {
	Department Department `json:"department"`
	Employees  []Employee `json:"employees"`
}

// ListDepartmentEmployees lists one department's employees. Another
// company's department is "not found", exactly like one that does not
// exist.
func ListDepartmentEmployees(ctx context.Context, db *guardedsql.DB, in DepartmentIn) (DepartmentEmployeesOut, error) {
	d := departmentsT.As("d")
	dq, err := builder.Select(d.DepartmentID(), d.DepartmentName(), d.ManagerID()).From(d.Ref()).
		Where(d.DepartmentID().Eq(in.DepartmentID)).Build()
	if err != nil {
		return DepartmentEmployeesOut{}, err
	}
	var out DepartmentEmployeesOut
	if err := db.QueryRow(ctx, dq).Scan(&out.Department.DepartmentID, &out.Department.DepartmentName, &out.Department.ManagerID); err != nil {
		return DepartmentEmployeesOut{}, err
	}
	e := employeesT.As("e")
	emps, err := queryEmployees(ctx, db, e, e.DepartmentID().Eq(in.DepartmentID))
	out.Employees = nonNil(emps)
	return out, err
}

// queryEmployees lists employees e (with their job titles) matching where,
// in id order.
func queryEmployees(ctx context.Context, db *guardedsql.DB, e EmployeesTable, where builder.Pred) ([]Employee, error) {
	j := jobsT.As("j")
	q, err := builder.Select(e.EmployeeID(), e.FirstName(), e.LastName(), e.Email(), e.PhoneNumber(), e.HireDate(),
		e.JobID(), j.JobTitle(), e.Salary(), e.CommissionPct(), e.ManagerID(), e.DepartmentID()).
		From(e.Ref()).Join(j.Ref(), j.JobID().EqCol(e.JobID())).
		Where(where).OrderBy(e.EmployeeID().Asc()).Limit(1000).Build()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	return guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (Employee, error) {
		var x Employee
		var first, phone *string
		var salary *float64
		err := rs.Scan(&x.EmployeeID, &first, &x.LastName, &x.Email, &phone, dateInto(&x.HireDate),
			&x.JobID, &x.JobTitle, &salary, &x.CommissionPct, &x.ManagerID, &x.DepartmentID)
		x.FirstName, x.PhoneNumber = deref(first), deref(phone)
		if salary != nil {
			x.Salary = *salary
		}
		return x, err
	})
}

// EmployeeIn names an employee.
type EmployeeIn struct {
	EmployeeID int64 `json:"employee_id"`
}

// HistoryEntry is one earlier assignment.
type HistoryEntry struct {
	StartDate      string `json:"start_date"`
	EndDate        string `json:"end_date"`
	JobID          string `json:"job_id"`
	JobTitle       string `json:"job_title"`
	DepartmentID   *int64 `json:"department_id,omitempty"`
	DepartmentName string `json:"department_name,omitempty"`
}

// JobHistoryOut is an employee's current job and earlier ones.
type JobHistoryOut struct {
	Employee Employee       `json:"employee"`
	History  []HistoryEntry `json:"history"`
}

// EmployeeJobHistory returns an employee and their job history, joined
// with jobs (global) and departments (tenant-bound: job_history's second
// path). Another company's employee is "not found".
func EmployeeJobHistory(ctx context.Context, db *guardedsql.DB, in EmployeeIn) (JobHistoryOut, error) {
	e := employeesT.As("e")
	emps, err := queryEmployees(ctx, db, e, e.EmployeeID().Eq(in.EmployeeID))
	if err != nil {
		return JobHistoryOut{}, err
	}
	if len(emps) != 1 {
		return JobHistoryOut{}, guardedsql.ErrNotFound
	}
	h, j, d := jobHistoryT.As("h"), jobsT.As("j"), departmentsT.As("d")
	q, err := builder.Select(h.StartDate(), h.EndDate(), h.JobID(), j.JobTitle(), h.DepartmentID(), d.DepartmentName()).
		From(h.Ref()).Join(j.Ref(), j.JobID().EqCol(h.JobID())).
		LeftJoin(d.Ref(), d.DepartmentID().EqCol(h.DepartmentID())).
		Where(h.EmployeeID().Eq(in.EmployeeID)).OrderBy(h.StartDate().Asc()).Build()
	if err != nil {
		return JobHistoryOut{}, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return JobHistoryOut{}, err
	}
	hist, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (HistoryEntry, error) {
		var x HistoryEntry
		var name *string
		err := rs.Scan(dateInto(&x.StartDate), dateInto(&x.EndDate), &x.JobID, &x.JobTitle, &x.DepartmentID, &name)
		x.DepartmentName = deref(name)
		return x, err
	})
	return JobHistoryOut{Employee: emps[0], History: nonNil(hist)}, err
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// nonNil keeps empty results as [] rather than null on the wire.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func invalid(format string, args ...any) error { return server.InvalidInput(format, args...) }
