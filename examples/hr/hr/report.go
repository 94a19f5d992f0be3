package hr

import (
	"context"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
)

// DepartmentHeadcount is one line of the headcount report. Totals are pay
// (a department of one shows that person's salary), tagged like salaries.
type DepartmentHeadcount struct {
	DepartmentID   int64   `json:"department_id"`
	DepartmentName string  `json:"department_name"`
	Headcount      int64   `json:"headcount"`
	TotalSalary    float64 `json:"total_salary" pii:"ssn"`
}

// HeadcountOut is the report: one line per department, the employees in
// no department, and the totals.
type HeadcountOut struct {
	Departments      []DepartmentHeadcount `json:"departments"`
	Unassigned       int64                 `json:"unassigned"`
	UnassignedSalary float64               `json:"unassigned_salary" pii:"ssn"`
	Headcount        int64                 `json:"headcount"`
	TotalSalary      float64               `json:"total_salary" pii:"ssn"`
}

// HeadcountReport counts employees and sums salaries per department of the
// caller's companies: departments LEFT JOIN employees GROUP BY department
// (empty departments count 0), then the employees in no department.
// COUNT and SUM see only the caller's rows, like everything the guard
// renders.
func HeadcountReport(ctx context.Context, db *guardedsql.DB, _ struct{}) (HeadcountOut, error) {
	d, e := departmentsT.As("d"), employeesT.As("e")
	q, err := builder.Select(d.DepartmentID(), d.DepartmentName(), builder.Count(e.EmployeeID()), builder.Coalesce(builder.Sum(e.Salary()), 0)).
		From(d.Ref()).LeftJoin(e.Ref(), e.DepartmentID().EqCol(d.DepartmentID())).
		GroupBy(d.DepartmentID(), d.DepartmentName()).OrderBy(d.DepartmentID().Asc()).Build()
	if err != nil {
		return HeadcountOut{}, err
	}
	rows, err := db.Query(ctx, q)
	if err != nil {
		return HeadcountOut{}, err
	}
	lines, err := guardedsql.CollectRows(rows, func(rs *guardedsql.Rows) (DepartmentHeadcount, error) {
		var x DepartmentHeadcount
		return x, rs.Scan(&x.DepartmentID, &x.DepartmentName, &x.Headcount, &x.TotalSalary)
	})
	if err != nil {
		return HeadcountOut{}, err
	}
	out := HeadcountOut{Departments: nonNil(lines)}
	u := employeesT.As("u")
	uq, err := builder.Select(builder.CountAll(), builder.Coalesce(builder.Sum(u.Salary()), 0)).From(u.Ref()).
		Where(u.DepartmentID().IsNull()).Build()
	if err != nil {
		return HeadcountOut{}, err
	}
	if err := db.QueryRow(ctx, uq).Scan(&out.Unassigned, &out.UnassignedSalary); err != nil {
		return HeadcountOut{}, err
	}
	out.Headcount, out.TotalSalary = out.Unassigned, out.UnassignedSalary
	for _, l := range lines {
		out.Headcount += l.Headcount
		out.TotalSalary += l.TotalSalary
	}
	return out, nil
}
