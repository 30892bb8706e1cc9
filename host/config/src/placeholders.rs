//! `{{ env.VAR }}` and `{{ file./path }}` placeholders: how config values
//! (connector URLs, keys, plugin config, Redis URLs, registry credentials)
//! take secrets from the environment or mounted files. SQL templates
//! (`db::template`) scan their `{{ inputs.x }}` with the same scanner.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateError {
    MissingEnv(String),
    /// A variable or secret file that is there but empty: never a usable
    /// value (an empty key or secret would match or sign anything).
    EmptyEnv(String),
    /// A `{{ file./path }}` that cannot be read: the path and why.
    SecretFile(String, String),
    Invalid(String),
}

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TemplateError::MissingEnv(v) => write!(f, "environment variable {v} is not set"),
            TemplateError::EmptyEnv(v) => write!(f, "{v} is empty"),
            TemplateError::SecretFile(path, why) => write!(f, "secret file {path}: {why}"),
            TemplateError::Invalid(m) => f.write_str(m),
        }
    }
}

/// Replaces `{{ env.VAR }}` and `{{ file./path }}` (the file's content,
/// without a trailing newline: a mounted secret) in any text — connector
/// URLs, paths, plugin config. Error messages name the variable or file,
/// never a value.
pub fn substitute_env(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((before, name, after)) = next_placeholder(rest)? {
        out.push_str(before);
        if let Some(var) = name.strip_prefix("env.") {
            out.push_str(&env_value(var, env)?);
        } else if let Some(path) = name.strip_prefix("file.") {
            let text = std::fs::read_to_string(path)
                .map_err(|e| TemplateError::SecretFile(path.to_string(), e.kind().to_string()))?;
            let text = text.strip_suffix('\n').unwrap_or(&text);
            if text.is_empty() {
                return Err(TemplateError::EmptyEnv(format!("secret file {path}")));
            }
            out.push_str(text);
        } else {
            return Err(TemplateError::Invalid(format!(
                "only {{{{ env.VAR }}}} or {{{{ file./path }}}} may appear here, not {{{{ {name} }}}}"
            )));
        }
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

/// The value of `{{ env.VAR }}`: missing and empty are both errors.
pub fn env_value(var: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, TemplateError> {
    match env(var) {
        None => Err(TemplateError::MissingEnv(var.to_string())),
        Some(value) if value.is_empty() => Err(TemplateError::EmptyEnv(format!(
            "environment variable {var}"
        ))),
        Some(value) => Ok(value),
    }
}

/// Splits at the next `{{ name }}`: (text before, trimmed name, text after).
pub fn next_placeholder(text: &str) -> Result<Option<(&str, &str, &str)>, TemplateError> {
    let Some(start) = text.find("{{") else {
        return Ok(None);
    };
    let Some(len) = text[start + 2..].find("}}") else {
        return Err(TemplateError::Invalid("unclosed {{ in statement".into()));
    };
    let name = text[start + 2..start + 2 + len].trim();
    Ok(Some((&text[..start], name, &text[start + 2 + len + 2..])))
}
