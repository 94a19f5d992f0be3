package hr

import (
	"fmt"
	"strings"

	"github.com/tenantmcp/tenantmcp/builder"
)

// LevelCompany is the only scope level: the company (tenant) an HR
// department belongs to, a text id such as "acme".
const LevelCompany = "company"

// SchemaDef is the Oracle HR sample schema (regions, countries, locations,
// departments, jobs, employees, job_history) made multi-tenant by company,
// with its real column names, types and keys:
//
//   - companies is the tenant root (company_id carries the level);
//   - departments and employees carry company_id themselves, a level column:
//     an employee need not be in a department (the sample's Kimberely Grant
//     is not), so the department cannot be the employee's path;
//   - job_history reaches its company through the employee (Parent), and
//     also references a department: a second, consistency path that every
//     write must keep inside the writer's companies;
//   - employees.manager_id → employees, employees.department_id →
//     departments and departments.manager_id → employees are foreign keys
//     between tenant tables, every one declared, so the guard checks each
//     on writes;
//   - locations has no company column: its rows are owned by the
//     departments that reference them (an office belongs to the company
//     whose departments sit there), see locationsDef;
//   - regions, countries and jobs are shared reference data (global).
//
// The sample's unique e-mail becomes UNIQUE (company_id, email): a key
// shared by every company would answer "taken" for another company's
// address, an oracle. job_history keeps its primary key (employee_id,
// start_date), a DATE in a key.
func SchemaDef() builder.SchemaDef {
	return builder.SchemaDef{
		Levels: []builder.Level{{Name: LevelCompany, Key: builder.TextKey}},
		Tables: []builder.TableDef{
			{Name: "regions", Columns: []string{"region_id", "region_name"}, PrimaryKey: []string{"region_id"}, Global: true},
			{Name: "countries", Columns: []string{"country_id", "country_name", "region_id"}, PrimaryKey: []string{"country_id"}, Global: true,
				ForeignKeys: []builder.ForeignKey{{Columns: []string{"region_id"}, RefTable: "regions"}}},
			{Name: "jobs", Columns: []string{"job_id", "job_title", "min_salary", "max_salary"}, PrimaryKey: []string{"job_id"}, Global: true},
			{Name: "companies", Columns: []string{"company_id", "company_name"}, PrimaryKey: []string{"company_id"},
				Levels: map[string]string{"company_id": LevelCompany}},
			locationsDef(),
			{Name: "departments", Columns: []string{"department_id", "company_id", "department_name", "manager_id", "location_id"},
				PrimaryKey:   []string{"department_id"},
				SharedUnique: generatedID("department_id"),
				ForeignKeys: []builder.ForeignKey{
					{Columns: []string{"company_id"}, RefTable: "companies"},
					{Columns: []string{"manager_id"}, RefTable: "employees"},
					{Columns: []string{"location_id"}, RefTable: "locations"},
				},
				Levels: map[string]string{"company_id": LevelCompany}},
			{Name: "employees", Columns: []string{"employee_id", "company_id", "first_name", "last_name", "email", "phone_number",
				"hire_date", "job_id", "salary", "commission_pct", "manager_id", "department_id"},
				PrimaryKey:   []string{"employee_id"},
				SharedUnique: generatedID("employee_id"),
				Unique:       [][]string{{"company_id", "email"}},
				ForeignKeys: []builder.ForeignKey{
					{Columns: []string{"company_id"}, RefTable: "companies"},
					{Columns: []string{"job_id"}, RefTable: "jobs"},
					{Columns: []string{"manager_id"}, RefTable: "employees"},
					{Columns: []string{"department_id"}, RefTable: "departments"},
				},
				Levels: map[string]string{"company_id": LevelCompany}},
			{Name: "job_history", Columns: []string{"employee_id", "start_date", "end_date", "job_id", "department_id"},
				PrimaryKey: []string{"employee_id", "start_date"},
				ForeignKeys: []builder.ForeignKey{
					{Columns: []string{"employee_id"}, RefTable: "employees"},
					{Columns: []string{"job_id"}, RefTable: "jobs"},
					{Columns: []string{"department_id"}, RefTable: "departments"},
				},
				Parent: "employee_id"},
		},
	}
}

// locationsDef declares locations. Its rows carry no company: an office
// address belongs to the companies whose departments reference it.
func locationsDef() builder.TableDef {
	return builder.TableDef{Name: "locations",
		Columns:      []string{"location_id", "street_address", "postal_code", "city", "state_province", "country_id"},
		PrimaryKey:   []string{"location_id"},
		SharedUnique: generatedID("location_id"),
		ForeignKeys:  []builder.ForeignKey{{Columns: []string{"country_id"}, RefTable: "countries"}},
		// A location is visible to a company while one of its departments
		// references it; writable only while no other company's does.
		OwnedByReference: true,
	}
}

// generatedID acknowledges a primary key col drawn by the database from
// one sequence for all companies: an insert naming an id another company's
// row holds conflicts, which reveals only that the id was drawn. The
// example's tools never supply these ids, so start-up logs the key at
// debug level only.
func generatedID(col string) map[string]string {
	return map[string]string{col: "ids come from one database sequence; a conflict reveals only that an id was drawn, not whose row holds it or any of its values"}
}

// Schema is the validated HR schema graph.
var Schema = builder.MustSchema(SchemaDef())

// Engine names the SQL dialects the example's DDL is written for (the
// values of conformance.Engine).
type Engine string

// Engines.
const (
	SQLite   Engine = "sqlite"
	Postgres Engine = "postgres"
	MySQL    Engine = "mysql"
)

// Tables lists the HR tables in creation order (drop them in reverse).
var Tables = []string{"regions", "countries", "jobs", "companies", "locations", "departments", "employees", "job_history"}

// DDL returns the statements that create the HR tables on engine: the
// sample's columns and types (NUMBER(4) and NUMBER(6) ids, NUMBER(8,2)
// salaries, DATE hire and history dates, CHAR(2) country ids), ids generated
// by the database as the sample's sequences did, every foreign key, and the
// indexes the tenant predicates and the tools walk. departments.manager_id
// and employees.department_id reference each other; as in the sample's
// script, the first is added after employees exists (SQLite, which cannot
// add a constraint later, accepts a forward reference).
//
// One constraint of the sample is not created: job_history's
// jhist_date_interval CHECK (end_date > start_date), which
// transfer_employee enforces instead. The conformance suite's write
// controls insert a copy of an own row with a new value in every primary
// key column, start_date included, and keep its end_date; no new start
// date it could choose is sure to precede every copied end date, so the
// CHECK would refuse the control and fail the run.
func DDL(engine Engine) ([]string, error) {
	var id, text, company string
	switch engine {
	case SQLite:
		id, text, company = "INTEGER PRIMARY KEY", "TEXT", "TEXT"
	case Postgres:
		id, text, company = "INTEGER GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", "VARCHAR", "VARCHAR(64)"
	case MySQL:
		id, text, company = "INTEGER AUTO_INCREMENT PRIMARY KEY", "VARCHAR", "VARCHAR(64)"
	default:
		return nil, fmt.Errorf("hr: unknown engine %q", engine)
	}
	v := func(n int) string { // VARCHAR2(n)
		if engine == SQLite {
			return text
		}
		return fmt.Sprintf("%s(%d)", text, n)
	}
	mgrInline := ""
	if engine == SQLite {
		mgrInline = " REFERENCES employees(employee_id)"
	}
	ddl := []string{
		`CREATE TABLE regions (region_id INTEGER NOT NULL PRIMARY KEY, region_name ` + v(25) + `)`,
		`CREATE TABLE countries (country_id CHAR(2) NOT NULL PRIMARY KEY, country_name ` + v(40) + `, region_id INTEGER,
			FOREIGN KEY (region_id) REFERENCES regions(region_id))`,
		`CREATE TABLE jobs (job_id ` + v(10) + ` NOT NULL PRIMARY KEY, job_title ` + v(35) + ` NOT NULL,
			min_salary INTEGER, max_salary INTEGER)`,
		`CREATE TABLE companies (company_id ` + company + ` NOT NULL PRIMARY KEY, company_name ` + v(60) + ` NOT NULL)`,
		`CREATE TABLE locations (location_id ` + id + `, street_address ` + v(40) + `, postal_code ` + v(12) + `,
			city ` + v(30) + ` NOT NULL, state_province ` + v(25) + `, country_id CHAR(2),
			FOREIGN KEY (country_id) REFERENCES countries(country_id))`,
		`CREATE TABLE departments (department_id ` + id + `, company_id ` + company + ` NOT NULL,
			department_name ` + v(30) + ` NOT NULL, manager_id INTEGER` + mgrInline + `, location_id INTEGER,
			FOREIGN KEY (company_id) REFERENCES companies(company_id),
			FOREIGN KEY (location_id) REFERENCES locations(location_id))`,
		`CREATE INDEX dept_company_ix ON departments (company_id)`,
		`CREATE INDEX dept_location_ix ON departments (location_id)`,
		`CREATE TABLE employees (employee_id ` + id + `, company_id ` + company + ` NOT NULL,
			first_name ` + v(20) + `, last_name ` + v(25) + ` NOT NULL, email ` + v(25) + ` NOT NULL,
			phone_number ` + v(20) + `, hire_date DATE NOT NULL, job_id ` + v(10) + ` NOT NULL,
			salary NUMERIC(8,2), commission_pct NUMERIC(2,2), manager_id INTEGER, department_id INTEGER,
			CONSTRAINT emp_salary_min CHECK (salary > 0),
			CONSTRAINT emp_email_uk UNIQUE (company_id, email),
			FOREIGN KEY (company_id) REFERENCES companies(company_id),
			FOREIGN KEY (job_id) REFERENCES jobs(job_id),
			FOREIGN KEY (manager_id) REFERENCES employees(employee_id),
			FOREIGN KEY (department_id) REFERENCES departments(department_id))`,
		`CREATE INDEX emp_department_ix ON employees (department_id)`,
		`CREATE INDEX emp_manager_ix ON employees (manager_id)`,
		`CREATE TABLE job_history (employee_id INTEGER NOT NULL, start_date DATE NOT NULL, end_date DATE NOT NULL,
			job_id ` + v(10) + ` NOT NULL, department_id INTEGER,
			CONSTRAINT jhist_emp_id_st_date_pk PRIMARY KEY (employee_id, start_date),
			FOREIGN KEY (employee_id) REFERENCES employees(employee_id),
			FOREIGN KEY (job_id) REFERENCES jobs(job_id),
			FOREIGN KEY (department_id) REFERENCES departments(department_id))`,
		`CREATE INDEX jhist_department_ix ON job_history (department_id)`,
	}
	if engine != SQLite {
		ddl = append(ddl, `ALTER TABLE departments ADD CONSTRAINT dept_mgr_fk FOREIGN KEY (manager_id) REFERENCES employees(employee_id)`)
	}
	for i, s := range ddl {
		ddl[i] = strings.Join(strings.Fields(s), " ")
	}
	return ddl, nil
}
