package hr

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// HireIn is the input of hire_employee. The company is the department's:
// no input names it.
type HireIn struct {
	FirstName     string   `json:"first_name"`
	LastName      string   `json:"last_name"`
	Email         string   `json:"email" jsonschema:"the e-mail user id, unique within the company (e.g. SKING)"`
	PhoneNumber   string   `json:"phone_number,omitempty"`
	HireDate      string   `json:"hire_date" jsonschema:"YYYY-MM-DD"`
	JobID         string   `json:"job_id" jsonschema:"a job id such as IT_PROG"`
	Salary        float64  `json:"salary" jsonschema:"within the job's salary range"`
	CommissionPct *float64 `json:"commission_pct,omitempty" jsonschema:"0 to 0.99, sales jobs"`
	ManagerID     *int64   `json:"manager_id,omitempty" jsonschema:"default: the department's manager"`
	DepartmentID  int64    `json:"department_id"`
}

// HiredOut is the new employee's id.
type HiredOut struct {
	EmployeeID int64 `json:"employee_id"`
}

// HireEmployee inserts an employee into one of the caller's departments,
// in one transaction: the department is read first (another company's is
// not found), the manager must be an employee of the same company (a
// caller of two companies could otherwise cross them; the guard itself
// only keeps the manager within the caller's companies), and the salary
// must lie within the job's range. The e-mail id is unique per company: a
// taken one is a conflict, and another company's use of the same id is
// invisible.
func HireEmployee(ctx context.Context, db *guardedsql.DB, in HireIn) (HiredOut, error) {
	if strings.TrimSpace(in.LastName) == "" || strings.TrimSpace(in.Email) == "" || in.JobID == "" {
		return HiredOut{}, invalid("last_name, email and job_id are required")
	}
	if len(in.Email) > 25 || len(in.LastName) > 25 || len(in.FirstName) > 20 || len(in.PhoneNumber) > 20 {
		return HiredOut{}, invalid("email and last_name take at most 25 characters, first_name and phone_number 20")
	}
	hired, err := parseDate("hire_date", in.HireDate)
	if err != nil {
		return HiredOut{}, err
	}
	if in.CommissionPct != nil && (*in.CommissionPct < 0 || *in.CommissionPct >= 1) {
		return HiredOut{}, invalid("commission_pct must be at least 0 and below 1")
	}
	var out HiredOut
	err = db.Tx(ctx, func(tx *guardedsql.Tx) error {
		company, deptManager, err := departmentCompany(ctx, tx, in.DepartmentID)
		if err != nil {
			return err
		}
		if err := checkSalary(ctx, tx, in.JobID, in.Salary); err != nil {
			return err
		}
		manager := deptManager
		if in.ManagerID != nil {
			if err := sameCompany(ctx, tx, *in.ManagerID, company); err != nil {
				return err
			}
			manager = in.ManagerID
		}
		ins, err := builder.InsertInto(employeesT.Ref()).
			Columns("company_id", "first_name", "last_name", "email", "phone_number", "hire_date", "job_id",
				"salary", "commission_pct", "manager_id", "department_id").
			Values(company, nullText(in.FirstName), in.LastName, in.Email, nullText(in.PhoneNumber), hired, in.JobID,
				in.Salary, ptrValue(in.CommissionPct), ptrValue(manager), in.DepartmentID).
			Returning("employee_id").Build()
		if err != nil {
			return err
		}
		rows, err := tx.ExecReturning(ctx, ins)
		if err != nil {
			return err // ErrConflict: the company already has this e-mail id
		}
		out, err = guardedsql.CollectOne(rows, guardedsql.RowToStruct[HiredOut])
		return err
	})
	return out, err
}

// departmentCompany reads a department's company and manager: not found
// unless it is one of the caller's.
func departmentCompany(ctx context.Context, tx *guardedsql.Tx, id int64) (string, *int64, error) {
	d := departmentsT.As("d")
	q, err := builder.Select(d.CompanyID(), d.ManagerID()).From(d.Ref()).Where(d.DepartmentID().Eq(id)).Build()
	if err != nil {
		return "", nil, err
	}
	var company string
	var manager *int64
	err = tx.QueryRow(ctx, q).Scan(&company, &manager)
	return company, manager, err
}

// sameCompany checks that employee id is one of the caller's and works for
// company; one of the caller's other companies is invalid input.
func sameCompany(ctx context.Context, tx *guardedsql.Tx, id int64, company string) error {
	e := employeesT.As("e")
	q, err := builder.Select(e.CompanyID()).From(e.Ref()).Where(e.EmployeeID().Eq(id)).Build()
	if err != nil {
		return err
	}
	var got string
	if err := tx.QueryRow(ctx, q).Scan(&got); err != nil {
		return err
	}
	if got != company {
		return invalid("employee %d works for another of your companies than the department", id)
	}
	return nil
}

// checkSalary checks salary against the job's range (jobs is global).
func checkSalary(ctx context.Context, tx *guardedsql.Tx, job string, salary float64) error {
	j := jobsT.As("j")
	q, err := builder.Select(j.MinSalary(), j.MaxSalary()).From(j.Ref()).Where(j.JobID().Eq(job)).Build()
	if err != nil {
		return err
	}
	var lo, hi *int64
	if err := tx.QueryRow(ctx, q).Scan(&lo, &hi); err != nil {
		return err
	}
	if salary <= 0 || lo != nil && salary < float64(*lo) || hi != nil && salary > float64(*hi) {
		return invalid("salary %.2f is outside the range of job %s (%d to %d)", salary, job, deref(lo), deref(hi))
	}
	return nil
}

// TransferIn is the input of transfer_employee.
type TransferIn struct {
	EmployeeID    int64  `json:"employee_id"`
	DepartmentID  int64  `json:"department_id" jsonschema:"the department the employee moves to"`
	EffectiveDate string `json:"effective_date" jsonschema:"first day in the new department, YYYY-MM-DD"`
	JobID         string `json:"job_id,omitempty" jsonschema:"the new job; default: the current one"`
}

// TransferOut reports a transfer: the recorded assignment and the new one.
type TransferOut struct {
	EmployeeID   int64        `json:"employee_id"`
	Recorded     HistoryEntry `json:"recorded"`
	DepartmentID int64        `json:"department_id"`
	JobID        string       `json:"job_id"`
	ManagerID    *int64       `json:"manager_id,omitempty"`
}

// TransferEmployee moves an employee to another department of the same
// company, in one transaction, as the sample's update_job_history trigger
// did (triggers on tenant tables are refused; the tool does it itself):
//
//  1. the employee is read FOR UPDATE (another company's is not found), so
//     two transfers of one employee run one after the other;
//  2. the target department must be of the employee's company;
//  3. the current assignment, which began on the hire date or the day
//     after the last recorded one ended, is recorded in job_history
//     (employee_id, start_date, end_date = the day before effective_date,
//     job, department): a row with two paths to the company, both checked;
//  4. the employee gets the new department, job and that department's
//     manager.
func TransferEmployee(ctx context.Context, db *guardedsql.DB, in TransferIn) (TransferOut, error) {
	eff, err := parseDate("effective_date", in.EffectiveDate)
	if err != nil {
		return TransferOut{}, err
	}
	out := TransferOut{EmployeeID: in.EmployeeID, DepartmentID: in.DepartmentID}
	err = db.Tx(ctx, func(tx *guardedsql.Tx) error {
		e := employeesT.As("e")
		q, err := builder.Select(e.CompanyID(), e.HireDate(), e.JobID(), e.DepartmentID()).From(e.Ref()).
			Where(e.EmployeeID().Eq(in.EmployeeID)).ForUpdate().Build()
		if err != nil {
			return err
		}
		var company, job string
		var hired time.Time
		var dept *int64
		if err := tx.QueryRow(ctx, q).Scan(&company, dateValue(&hired), &job, &dept); err != nil {
			return err
		}
		toCompany, toManager, err := departmentCompany(ctx, tx, in.DepartmentID)
		if err != nil {
			return err
		}
		if toCompany != company {
			return invalid("department %d belongs to another of your companies than employee %d", in.DepartmentID, in.EmployeeID)
		}
		if dept != nil && *dept == in.DepartmentID {
			return invalid("employee %d is already in department %d", in.EmployeeID, in.DepartmentID)
		}
		h := jobHistoryT.As("h")
		lq, err := builder.Select(builder.Max(h.EndDate())).From(h.Ref()).Where(h.EmployeeID().Eq(in.EmployeeID)).Build()
		if err != nil {
			return err
		}
		var lastEnd time.Time
		if err := tx.QueryRow(ctx, lq).Scan(dateValue(&lastEnd)); err != nil {
			return err
		}
		start := hired
		if next := lastEnd.AddDate(0, 0, 1); !lastEnd.IsZero() && next.After(start) {
			start = next
		}
		end := eff.AddDate(0, 0, -1)
		if !end.After(start) {
			return invalid("effective_date must be after %s: the current assignment began on %s", start.AddDate(0, 0, 1).Format(time.DateOnly), start.Format(time.DateOnly))
		}
		newJob := job
		if in.JobID != "" {
			newJob = in.JobID
		}
		rec := HistoryEntry{StartDate: start.Format(time.DateOnly), EndDate: end.Format(time.DateOnly), JobID: job, DepartmentID: dept}
		ins, err := builder.InsertInto(jobHistoryT.Ref()).Columns("employee_id", "start_date", "end_date", "job_id", "department_id").
			Values(in.EmployeeID, start, end, rec.JobID, ptrValue(dept)).Build()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, ins); err != nil {
			return err
		}
		manager := toManager
		if manager != nil && *manager == in.EmployeeID {
			manager = nil // the department's own manager reports to no one in it
		}
		u, err := builder.UpdateTable(employeesT.Ref()).Set("department_id", in.DepartmentID).Set("job_id", newJob).
			Set("manager_id", ptrValue(manager)).Where(employeesT.EmployeeID().Eq(in.EmployeeID)).ExpectOne().Build()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, u); err != nil {
			return err
		}
		out.Recorded, out.JobID, out.ManagerID = rec, newJob, manager
		return nil
	})
	return out, err
}

// LocationIn is the input of update_location_address: the department whose
// office it is, and the corrected address.
type LocationIn struct {
	DepartmentID  int64  `json:"department_id"`
	StreetAddress string `json:"street_address"`
	PostalCode    string `json:"postal_code,omitempty"`
	City          string `json:"city"`
	StateProvince string `json:"state_province,omitempty"`
}

// UpdateLocationAddress corrects the address of a department's office. The
// location is found through the department (another company's department
// is not found) and updated by its id. Locations are owned by the
// departments that reference them: an office that another company's
// department also references is readable by both and writable by neither.
func UpdateLocationAddress(ctx context.Context, db *guardedsql.DB, in LocationIn) (Location, error) {
	if strings.TrimSpace(in.City) == "" || strings.TrimSpace(in.StreetAddress) == "" {
		return Location{}, invalid("street_address and city are required")
	}
	if len(in.StreetAddress) > 40 || len(in.PostalCode) > 12 || len(in.City) > 30 || len(in.StateProvince) > 25 {
		return Location{}, invalid("street_address takes at most 40 characters, postal_code 12, city 30, state_province 25")
	}
	var out Location
	err := db.Tx(ctx, func(tx *guardedsql.Tx) error {
		d := departmentsT.As("d")
		q, err := builder.Select(d.LocationID()).From(d.Ref()).Where(d.DepartmentID().Eq(in.DepartmentID)).Build()
		if err != nil {
			return err
		}
		var loc *int64
		if err := tx.QueryRow(ctx, q).Scan(&loc); err != nil {
			return err
		}
		if loc == nil {
			return invalid("department %d has no office", in.DepartmentID)
		}
		l := locationsT
		u, err := builder.UpdateTable(l.Ref()).Set("street_address", in.StreetAddress).Set("postal_code", nullText(in.PostalCode)).
			Set("city", in.City).Set("state_province", nullText(in.StateProvince)).
			Where(l.LocationID().Eq(*loc)).ExpectOne().Build()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, u); errors.Is(err, guardedsql.ErrSharedRow) {
			// Says only that a department outside the caller's companies
			// references the office too, nothing about which.
			return invalid("the office of department %d is shared with departments outside your companies; it cannot be changed here", in.DepartmentID)
		} else if err != nil {
			return err
		}
		r := locationsT.As("l")
		rq, err := builder.Select(r.LocationID(), r.StreetAddress(), r.PostalCode(), r.City(), r.StateProvince(), r.CountryID()).
			From(r.Ref()).Where(r.LocationID().Eq(*loc)).Build()
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, rq)
		if err != nil {
			return err
		}
		out, err = guardedsql.CollectOne(rows, scanLocation)
		return err
	})
	return out, err
}

// nullText stores an empty optional text as NULL, as the sample does.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ptrValue is a nullable value: NULL for nil.
func ptrValue[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
