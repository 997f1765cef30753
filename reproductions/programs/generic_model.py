# A generic tabular model for any competition: numeric features, one model per target column of the sample
# submission (a classifier's probability for a 0/1 target, a regressor otherwise).
import os

import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

data = os.environ["DATA_DIR"]
train = pd.read_csv(os.path.join(data, "train.csv"))
test = pd.read_csv(os.path.join(data, "test.csv"))
sample = pd.read_csv(os.path.join(data, "sample_submission.csv"))
id_column, targets = sample.columns[0], list(sample.columns[1:])
features = [c for c in test.columns if c != id_column and c in train.columns and pd.api.types.is_numeric_dtype(train[c])]
submission = pd.DataFrame({id_column: test[id_column]})
for target in targets:
    y = train[target]
    if set(y.dropna().unique()) <= {0, 1}:
        model = HistGradientBoostingClassifier(max_iter=100, random_state=0).fit(train[features], y)
        submission[target] = model.predict_proba(test[features])[:, 1]
    else:
        model = HistGradientBoostingRegressor(max_iter=100, random_state=0).fit(train[features], y)
        submission[target] = model.predict(test[features])
submission.to_csv(os.environ["SUBMISSION_PATH"], index=False)
