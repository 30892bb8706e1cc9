//! SQL templates: `{{ env.VAR }}` is replaced by the variable's value when
//! the tool loads; each `{{ inputs.x }}` becomes a bound parameter (`$1` for
//! Postgres, `?1` for SQLite). Input text never becomes SQL text.

use std::collections::HashMap;

// `{{ env.VAR }}` / `{{ file.… }}` belong to config files as much as to
// statements; their scanner lives in config/, below every layer.
pub use hangar_config::placeholders::{TemplateError, substitute_env};
use hangar_config::placeholders::{env_value, next_placeholder};

/// How a connector writes parameter `n` (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamStyle {
    Dollar,
    QuestionNumbered,
}

/// A statement ready to prepare, with the input bound to each parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    pub sql: String,
    /// Input names in parameter order: `params[0]` binds `$1`.
    pub params: Vec<String>,
}

/// Compiles a statement: env placeholders are substituted, input placeholders
/// become parameters. Placeholders where a parameter cannot stand (inside a
/// string literal, or as a table, column or alias name) are rejected.
pub fn compile(
    statement: &str,
    style: ParamStyle,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Compiled, TemplateError> {
    let mut sql = String::with_capacity(statement.len());
    let mut params: Vec<String> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut rest = statement;
    while let Some((before, name, after)) = next_placeholder(rest)? {
        sql.push_str(before);
        if let Some(var) = name.strip_prefix("env.") {
            sql.push_str(&env_value(var, env)?);
        } else if let Some(input) = name.strip_prefix("inputs.") {
            if input.is_empty() || !input.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(TemplateError::Invalid(format!(
                    "bad input name in {{{{ {name} }}}}"
                )));
            }
            check_position(&sql, after, input)?;
            let n = *index.entry(input.to_string()).or_insert_with(|| {
                params.push(input.to_string());
                params.len()
            });
            match style {
                ParamStyle::Dollar => sql.push_str(&format!("${n}")),
                ParamStyle::QuestionNumbered => sql.push_str(&format!("?{n}")),
            }
        } else {
            return Err(TemplateError::Invalid(format!(
                "unknown placeholder {{{{ {name} }}}}: use {{{{ inputs.NAME }}}} or {{{{ env.VAR }}}}"
            )));
        }
        rest = after;
    }
    sql.push_str(rest);
    Ok(Compiled { sql, params })
}

/// Keywords after which the next token names a table, column or alias: a
/// parameter cannot stand there.
const NAME_POSITIONS: &[&str] = &["FROM", "JOIN", "INTO", "UPDATE", "TABLE", "BY", "AS"];

fn check_position(sql_before: &str, after: &str, input: &str) -> Result<(), TemplateError> {
    let invalid = |why: &str| {
        Err(TemplateError::Invalid(format!(
            "{{{{ inputs.{input} }}}} cannot be a query parameter here ({why}); inputs can only stand where a value goes"
        )))
    };
    if inside_string_literal(sql_before) {
        return invalid(
            "inside a quoted string; concatenate instead, e.g. '%' || {{ inputs.x }} || '%'",
        );
    }
    let before = sql_before.trim_end();
    if before.ends_with('.') || after.trim_start().starts_with('.') || before.ends_with('"') {
        return invalid("as part of a qualified name");
    }
    let upper = before.to_ascii_uppercase();
    let last_word = upper
        .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("");
    if NAME_POSITIONS.contains(&last_word) {
        return invalid(&format!(
            "after {last_word}, where a table, column or alias name goes"
        ));
    }
    Ok(())
}

/// Whether the end of `sql` is inside a '…' literal (doubled quotes escape).
fn inside_string_literal(sql: &str) -> bool {
    sql.chars().filter(|c| *c == '\'').count() % 2 == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(var: &str) -> Option<String> {
        (var == "SCHEMA").then(|| "public".to_string())
    }

    #[test]
    fn inputs_become_numbered_parameters_reused_by_name() {
        let c = compile(
            "SELECT * FROM {{ env.SCHEMA }}.users WHERE id = {{ inputs.id }} OR owner = {{inputs.id}} AND name = {{ inputs.name }}",
            ParamStyle::Dollar,
            &env,
        )
        .unwrap();
        assert_eq!(
            c.sql,
            "SELECT * FROM public.users WHERE id = $1 OR owner = $1 AND name = $2"
        );
        assert_eq!(c.params, vec!["id", "name"]);
        let q = compile(
            "SELECT {{ inputs.a }}, {{ inputs.b }}",
            ParamStyle::QuestionNumbered,
            &env,
        )
        .unwrap();
        assert_eq!(q.sql, "SELECT ?1, ?2");
    }

    #[test]
    fn secret_files_are_read_and_a_missing_one_is_named() {
        let path = std::env::temp_dir().join(format!("hangar-secret-{}", std::process::id()));
        std::fs::write(&path, "s3cret\n").unwrap();
        let text = format!("Bearer {{{{ file.{} }}}}", path.display());
        assert_eq!(substitute_env(&text, &env).unwrap(), "Bearer s3cret");
        std::fs::remove_file(&path).unwrap();
        let e = substitute_env(&text, &env).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("secret file {}: entity not found", path.display())
        );
    }

    #[test]
    fn an_empty_variable_or_secret_file_is_named_not_used() {
        let env = |var: &str| (var == "EMPTY").then(String::new);
        let e = substitute_env("key={{ env.EMPTY }}", &env).unwrap_err();
        assert_eq!(e.to_string(), "environment variable EMPTY is empty");
        let e = compile("SELECT '{{ env.EMPTY }}'", ParamStyle::Dollar, &env).unwrap_err();
        assert_eq!(
            e,
            TemplateError::EmptyEnv("environment variable EMPTY".into())
        );
        let path = std::env::temp_dir().join(format!("hangar-empty-{}", std::process::id()));
        std::fs::write(&path, "\n").unwrap();
        let e = substitute_env(&format!("{{{{ file.{} }}}}", path.display()), &env).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            e.to_string(),
            format!("secret file {} is empty", path.display())
        );
    }

    #[test]
    fn missing_env_is_named() {
        let e = compile("SELECT '{{ env.NOPE }}'", ParamStyle::Dollar, &env).unwrap_err();
        assert_eq!(e, TemplateError::MissingEnv("NOPE".into()));
        assert_eq!(
            substitute_env("postgres://{{ env.SCHEMA }}/x", &env).unwrap(),
            "postgres://public/x"
        );
    }

    #[test]
    fn placeholders_where_names_go_are_rejected() {
        for bad in [
            "SELECT * FROM {{ inputs.table }}",
            "SELECT * FROM t JOIN {{ inputs.t }} ON true",
            "SELECT * FROM t ORDER BY {{ inputs.col }}",
            "SELECT t.{{ inputs.col }} FROM t",
            "SELECT * FROM t WHERE name = '{{ inputs.name }}'",
            "INSERT INTO {{ inputs.t }} VALUES (1)",
            "SELECT 1 AS {{ inputs.alias }}",
            "SELECT {{ inputs.x }} {{ nonsense }}",
            "SELECT {{ inputs.bad-name }}",
        ] {
            assert!(
                matches!(
                    compile(bad, ParamStyle::Dollar, &env),
                    Err(TemplateError::Invalid(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn values_in_ordinary_positions_are_fine() {
        for ok in [
            "SELECT * FROM t WHERE name LIKE '%' || {{ inputs.q }} || '%' LIMIT {{ inputs.n }}",
            "UPDATE t SET v = {{ inputs.v }} WHERE id = {{ inputs.id }}",
            "SELECT * FROM t WHERE note = 'it''s' AND id IN ({{ inputs.a }}, {{ inputs.b }})",
        ] {
            assert!(compile(ok, ParamStyle::Dollar, &env).is_ok(), "{ok}");
        }
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        fn no_env(_: &str) -> Option<String> {
            None
        }

        /// Text where a value may stand next, with no quote or `$` in it.
        fn fragment() -> impl Strategy<Value = &'static str> {
            prop::sample::select(vec![
                "SELECT * FROM t WHERE a = ",
                " AND b = ",
                " OR lower(c) LIKE '%' || ",
                ", ",
                " + ",
                " IN (",
                ") LIMIT ",
                " WHERE id <> ",
                "\n  AND x >= ",
            ])
        }

        fn placeholder() -> impl Strategy<Value = (String, bool)> {
            ("[a-z_][a-z0-9_]{0,6}", any::<bool>())
        }

        proptest! {
            #[test]
            fn compile_never_panics(text in "\\PC{0,200}") {
                let _ = compile(&text, ParamStyle::Dollar, &no_env);
                let _ = compile(&text, ParamStyle::QuestionNumbered, &no_env);
                let _ = substitute_env(&text, &no_env);
            }

            #[test]
            fn compile_never_panics_on_brace_soup(text in "[{} .a-z'\"$?]{0,80}") {
                let _ = compile(&text, ParamStyle::Dollar, &no_env);
            }

            /// Placeholders in value positions become numbered parameters,
            /// one per distinct input in order of first use, and writing the
            /// placeholders back gives the statement again.
            #[test]
            fn values_become_parameters_and_back(
                parts in proptest::collection::vec((fragment(), placeholder()), 1..8),
                style in prop::sample::select(vec![ParamStyle::Dollar, ParamStyle::QuestionNumbered]),
            ) {
                let mut statement = String::new();
                for (frag, (name, spaced)) in &parts {
                    statement.push_str(frag);
                    if *spaced {
                        statement.push_str(&format!("{{{{ inputs.{name} }}}}"));
                    } else {
                        statement.push_str(&format!("{{{{inputs.{name}}}}}"));
                    }
                }
                let compiled = compile(&statement, style, &no_env).unwrap();
                let mut expected: Vec<String> = Vec::new();
                for (_, (name, _)) in &parts {
                    if !expected.contains(name) {
                        expected.push(name.clone());
                    }
                }
                prop_assert_eq!(&compiled.params, &expected);
                // Back: each parameter becomes its placeholder again.
                let mut back = String::new();
                let mut rest = compiled.sql.as_str();
                let marker = if style == ParamStyle::Dollar { '$' } else { '?' };
                while let Some(at) = rest.find(marker) {
                    back.push_str(&rest[..at]);
                    let digits: String = rest[at + 1..].chars().take_while(char::is_ascii_digit).collect();
                    let n: usize = digits.parse().unwrap();
                    back.push_str(&format!("{{{{ inputs.{} }}}}", compiled.params[n - 1]));
                    rest = &rest[at + 1 + digits.len()..];
                }
                back.push_str(rest);
                let normalized = statement.replace("{{inputs.", "{{ inputs.").replace("}}", " }}").replace("  }}", " }}");
                prop_assert_eq!(back, normalized);
            }

            /// Input text never reaches the SQL: only the names do.
            #[test]
            fn a_placeholder_inside_quotes_is_refused(
                before in "[a-z %]{0,20}",
                name in "[a-z][a-z0-9_]{0,6}",
            ) {
                let statement = format!("SELECT * FROM t WHERE a = '{before}{{{{ inputs.{name} }}}}'");
                let refused = matches!(
                    compile(&statement, ParamStyle::Dollar, &no_env),
                    Err(TemplateError::Invalid(_))
                );
                prop_assert!(refused);
            }
        }
    }
}
