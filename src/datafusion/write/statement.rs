//! natal's SQL entry point: any SQL text, planned by DataFusion after natal's own rewrites.
//! The natal CLI sends every statement through it (REPL, `-c`, `-f`); an embedder calls
//! [`sql`] where it would call `SessionContext::sql`.
//!
//! natal's own statements: `ALTER TABLE` (`alter.rs`), which DataFusion 55's planner refuses,
//! `CREATE TABLE` with `BLOB` columns (`blob_ddl.rs`), for which it has no type, and `RESET
//! natal.<option>`, which DataFusion 55 refuses for every option outside `datafusion.`.
//!
//! The rewrites, each for SQL that DataFusion 55 would refuse:
//! - `SELECT *, _rowid FROM "t$rows"`: `*` already holds the system columns there, so naming
//!   one beside it is a duplicate name to DataFusion. Naming `_rowid` or `_rowaddr` beside
//!   a `*` over one relation moves it: the `*` leaves it out (`EXCLUDE`) and it comes where
//!   it is named, as in Lance (DataFusion 55 has no hidden columns: apache/datafusion#15173).

use datafusion::dataframe::DataFrame;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::SessionState;
use datafusion::logical_expr::{LogicalPlan, WriteOp};
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::{DFParser, ResetStatement, Statement};
use datafusion::sql::sqlparser::ast::{
    self, ExcludeSelectItem, Expr, Ident, ObjectName, Query, Select, SelectItem, SetExpr, VisitMut,
    VisitorMut,
};
use datafusion::sql::sqlparser::dialect::dialect_from_str;

use crate::table::vector::vector_dimension;
use crate::table::{ROW_ADDR, ROW_ID};

/// Runs one statement of SQL text, with natal's rewrites (see the module header).
pub async fn sql(ctx: &SessionContext, text: &str) -> Result<DataFrame> {
    let mut statements = parse(&ctx.state(), text)?;
    let (Some(statement), None) = (statements.pop(), statements.pop()) else {
        return Err(DataFusionError::Plan(
            "natal::datafusion::sql runs one statement at a time".into(),
        ));
    };
    run_statement(ctx, statement).await
}

/// Runs one parsed statement: natal's own ([`is_natal_statement`]) by natal, any other
/// planned by DataFusion after natal's rewrites.
pub async fn run_statement(ctx: &SessionContext, mut statement: Statement) -> Result<DataFrame> {
    super::vector_ddl::rewrite_vector_types(&mut statement)?;
    if let Statement::Statement(inner) = &statement {
        if let ast::Statement::AlterTable(alter) = inner.as_ref() {
            return super::alter::alter_table(ctx, alter).await;
        }
    }
    if let Statement::Reset(ResetStatement::Variable(name)) = &statement {
        let key = name.to_string().to_ascii_lowercase();
        if let Some(option) = key.strip_prefix("natal.") {
            crate::datafusion::options::reset_option(ctx, option)?;
            return super::alter::no_rows(ctx);
        }
    }
    let normalize = ctx
        .state()
        .config_options()
        .sql_parser
        .enable_ident_normalization;
    let blobs = super::blob_ddl::take_blob_columns(&mut statement, normalize);
    rewrite(&mut statement);
    let plan = ctx.state().statement_to_plan(statement).await?;
    if !blobs.is_empty() {
        return super::blob_ddl::create_with_blobs(ctx, plan, &blobs).await;
    }
    // Literal values (of INSERT rows, of UPDATE's SET) are cast to the table's types while
    // the plan is optimized: a vector of another length fails there, before natal's sink
    // could name its column. Only writes to a table with a vector column are optimized
    // here ahead of their run (which optimizes again).
    if let LogicalPlan::Dml(dml) = &plan {
        let schema = dml.target.schema();
        let has_vectors =
            (schema.fields().iter()).any(|f| vector_dimension(f.data_type()).is_some());
        if has_vectors && matches!(dml.op, WriteOp::Insert(_) | WriteOp::Update) {
            if let Err(error) = ctx.state().optimize(&plan) {
                return Err(super::dml::naming_the_vector_column(error, &schema, None));
            }
        }
    }
    ctx.execute_logical_plan(plan).await
}

/// The statements of `text`, parsed in the session's SQL dialect.
pub fn parse(state: &SessionState, text: &str) -> Result<Vec<Statement>> {
    let dialect = &state.config_options().sql_parser.dialect;
    let dialect = dialect_from_str(dialect)
        .ok_or_else(|| DataFusionError::Plan(format!("unsupported SQL dialect {dialect}")))?;
    DFParser::parse_sql_with_dialect(text, dialect.as_ref())
        .map(Into::into)
        .map_err(|e| with_field_path_hint(text, e))
}

/// A parse error of an `ALTER TABLE` naming a field inside a column (`s.a`), which sqlparser
/// cannot read, with the way that works (a `Plan` error: natal's, not the parser's).
fn with_field_path_hint(text: &str, error: DataFusionError) -> DataFusionError {
    let words: Vec<String> = text
        .split_whitespace()
        .take(2)
        .map(str::to_ascii_lowercase)
        .collect();
    if words != ["alter", "table"] || !error.to_string().contains("found: .") {
        return error;
    }
    DataFusionError::Plan(format!(
        "{error}: ALTER TABLE takes one column name; a field inside a column changes through \
         natal_add_column, natal_drop_column, natal_rename_column or natal_alter_column, which \
         take its path (SELECT * FROM natal_rename_column('t', 's.a', 'b'))"
    ))
}

/// True for a statement natal runs itself (through [`sql`]), not DataFusion.
pub fn is_natal_statement(statement: &Statement) -> bool {
    // DataFusion's planner has no VECTOR type either.
    if super::vector_ddl::names_vector_type(statement) {
        return true;
    }
    let Statement::Statement(inner) = statement else {
        return false;
    };
    match inner.as_ref() {
        ast::Statement::AlterTable(_) => true,
        // DataFusion's planner has no BLOB type: natal plans the CREATE itself.
        ast::Statement::CreateTable(create) => {
            (create.columns.iter()).any(|column| super::blob_ddl::is_blob_type(&column.data_type))
        }
        _ => false,
    }
}

/// Applies natal's rewrites to `statement`; true when one changed it (DataFusion alone
/// would then refuse or misread it).
pub fn rewrite(statement: &mut Statement) -> bool {
    match statement {
        Statement::Statement(inner) => {
            let mut rewrites = Rewrites::default();
            let _ = inner.visit(&mut rewrites);
            rewrites.changed
        }
        Statement::Explain(explain) => rewrite(&mut explain.statement),
        _ => false,
    }
}

#[derive(Default)]
struct Rewrites {
    changed: bool,
}

impl VisitorMut for Rewrites {
    type Break = ();

    fn post_visit_query(&mut self, query: &mut Query) -> std::ops::ControlFlow<()> {
        self.changed |= rewrite_set_expr(&mut query.body);
        std::ops::ControlFlow::Continue(())
    }
}

/// The selects of a query body (nested queries are visited on their own).
fn rewrite_set_expr(body: &mut SetExpr) -> bool {
    match body {
        SetExpr::Select(select) => move_named_system_columns(select),
        SetExpr::SetOperation { left, right, .. } => {
            // Both sides run: `|` does not short-circuit.
            rewrite_set_expr(left) | rewrite_set_expr(right)
        }
        _ => false,
    }
}

/// The system column an unaliased select item names, if it names one.
fn named_system_column(item: &SelectItem) -> Option<&Ident> {
    let ident = match item {
        SelectItem::UnnamedExpr(Expr::Identifier(ident)) => ident,
        SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => parts.last()?,
        _ => return None,
    };
    let name = match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_ascii_lowercase(),
    };
    (name == ROW_ID || name == ROW_ADDR).then_some(ident)
}

/// `SELECT *, _rowid FROM one_relation`: the `*` excludes the system columns named beside it.
fn move_named_system_columns(select: &mut Select) -> bool {
    if select.from.len() != 1 || !select.from[0].joins.is_empty() {
        return false;
    }
    let named: Vec<ObjectName> = select
        .projection
        .iter()
        .filter_map(named_system_column)
        .map(|ident| ObjectName::from(vec![ident.clone()]))
        .collect();
    if named.is_empty() {
        return false;
    }
    let mut changed = false;
    for item in &mut select.projection {
        let options = match item {
            SelectItem::Wildcard(options) | SelectItem::QualifiedWildcard(_, options) => options,
            _ => continue,
        };
        let mut excluded = match options.opt_exclude.take() {
            None => Vec::new(),
            Some(ExcludeSelectItem::Single(name)) => vec![name],
            Some(ExcludeSelectItem::Multiple(names)) => names,
        };
        for name in &named {
            if !excluded.contains(name) {
                excluded.push(name.clone());
                changed = true;
            }
        }
        options.opt_exclude = Some(ExcludeSelectItem::Multiple(excluded));
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> (bool, String) {
        let state = SessionContext::new().state();
        let mut statement = parse(&state, sql).unwrap().remove(0);
        let changed = rewrite(&mut statement);
        (changed, statement.to_string())
    }

    #[test]
    fn a_system_column_named_beside_a_star_leaves_the_star() {
        let (changed, sql) = rewritten("SELECT *, _rowid FROM \"t$rows\"");
        assert!(changed);
        assert_eq!(sql, "SELECT * EXCLUDE (_rowid), _rowid FROM \"t$rows\"");
        let (_, sql) = rewritten("SELECT r.*, r._rowaddr, _ROWID FROM \"t$rows\" r WHERE a > 1");
        assert_eq!(
            sql,
            "SELECT r.* EXCLUDE (_rowaddr, _ROWID), r._rowaddr, _ROWID FROM \"t$rows\" r WHERE a > 1"
        );
        let (changed, sql) =
            rewritten("SELECT count(*) FROM (SELECT * EXCLUDE (a), _rowid FROM \"t$rows\")");
        assert!(changed);
        assert!(sql.contains("EXCLUDE (a, _rowid)"), "{sql}");
    }

    #[test]
    fn other_statements_are_left_as_written() {
        for sql in [
            "SELECT * FROM \"t$rows\"",
            "SELECT _rowid, a FROM \"t$rows\"",
            "SELECT *, _rowid AS id FROM \"t$rows\"",
            "SELECT *, a._rowid FROM \"t$rows\" a JOIN \"u$rows\" b ON a.k = b.k",
            "INSERT INTO t VALUES (1)",
        ] {
            assert!(!rewritten(sql).0, "{sql}");
        }
    }
}
